//! `queen --help` with its commands in groups.

use std::fmt::Write as _;

/// The groups of `queen --help`, in order, with their commands.
pub const GROUPS: &[(&str, &[&str])] = &[
    ("Messages", &["push", "pop", "tail", "ack", "tx", "lease"]),
    (
        "Queues and consumers",
        &["queues", "apply", "groups", "dlq", "messages", "traces"],
    ),
    ("Key/value, locks and timers", &["kv", "locks", "timers"]),
    ("Ephemeral queues and streams", &["ephemeral", "streams"]),
    ("Broker", &["status", "analytics", "maintenance", "metrics"]),
    ("Command line", &["config", "completion", "help"]),
];

/// The top-level command with the grouped command list in its help.
pub fn command(cmd: clap::Command) -> clap::Command {
    let width = cmd
        .get_subcommands()
        .map(|c| c.get_name().len())
        .max()
        .unwrap_or(0);
    let mut groups = String::new();
    for (heading, names) in GROUPS {
        let _ = writeln!(groups, "{heading}:");
        for name in *names {
            let about = cmd
                .find_subcommand(name)
                .and_then(clap::Command::get_about)
                .map(ToString::to_string)
                .unwrap_or_else(|| "Print this message or the help of the given command".into());
            let _ = writeln!(groups, "  {name:width$}  {about}");
        }
        groups.push('\n');
    }
    let template = format!(
        "{{before-help}}{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{groups}Options:\n{{options}}{{after-help}}"
    );
    cmd.help_template(template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn every_command_is_in_one_group() {
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let grouped: Vec<&str> = GROUPS.iter().flat_map(|(_, n)| n.iter().copied()).collect();
        for sub in cmd.get_subcommands() {
            let n = grouped.iter().filter(|g| **g == sub.get_name()).count();
            assert_eq!(n, 1, "{} is in {n} groups", sub.get_name());
        }
        assert_eq!(grouped.len(), cmd.get_subcommands().count());
        let help = command(cmd).render_help().to_string();
        assert!(
            help.contains("Key/value, locks and timers:\n  kv "),
            "{help}"
        );
        assert!(help.contains("Options:\n"), "{help}");
    }

    /// Every command with subcommands, with the names of its subcommands.
    fn parents(cmd: &clap::Command, out: &mut Vec<(String, Vec<String>)>) {
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        if !subs.is_empty() {
            out.push((cmd.get_name().to_owned(), subs));
        }
        for sub in cmd.get_subcommands() {
            parents(sub, out);
        }
    }

    #[test]
    fn bash_completion_offers_every_subcommand() {
        let mut cmd = command(crate::cli::Cli::command());
        let mut script = Vec::new();
        clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "queen", &mut script);
        let script = String::from_utf8(script).unwrap();
        let offered: Vec<Vec<&str>> = script
            .lines()
            .filter_map(|l| l.trim().strip_prefix("opts=\""))
            .map(|l| l.trim_end_matches('"').split_whitespace().collect())
            .collect();
        cmd.build();
        let mut all = Vec::new();
        parents(&cmd, &mut all);
        assert!(all.len() > 15, "{all:?}");
        for (parent, subs) in &all {
            assert!(
                offered
                    .iter()
                    .any(|words| subs.iter().all(|s| words.contains(&s.as_str()))),
                "bash completion of {parent} lacks some of {subs:?}"
            );
        }
    }
}
