//! Contexts: named brokers (URL, token, default queue) in a YAML file under
//! the user's configuration directory, and `queen config`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::output::{self, Failure, Format, Table};

/// The URL used when neither a flag, the environment nor a context names one.
pub const DEFAULT_URL: &str = "http://localhost:6632";

#[derive(Debug, Clone, Subcommand)]
pub enum ConfigCommand {
    /// Create or update a context; only the values given change
    /// (`queen config set-context prod --url URL --token JWT --queue Q`).
    SetContext {
        name: String,
        /// Default queue of `pop` and `tail` in this context.
        #[arg(long)]
        queue: Option<String>,
    },
    /// Make a context the current one.
    UseContext { name: String },
    /// Every context; `*` marks the current one (tokens are not shown).
    GetContexts,
    /// The name of the current context.
    CurrentContext,
    /// Delete a context (the current one too: then none is current).
    DeleteContext { name: String },
}

/// One named broker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// The configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(
        rename = "current-context",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: BTreeMap<String, Context>,
}

/// Where the configuration lives: `$QUEEN_CONFIG`, else
/// `<config dir>/queen/config.yaml` (`$XDG_CONFIG_HOME` or `~/.config` on Linux).
pub fn path() -> Result<PathBuf, Failure> {
    if let Some(p) = std::env::var_os("QUEEN_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    dirs::config_dir()
        .map(|d| d.join("queen").join("config.yaml"))
        .ok_or_else(|| {
            Failure::Usage(
                "no configuration directory (set HOME, XDG_CONFIG_HOME or QUEEN_CONFIG)".into(),
            )
        })
}

impl ConfigFile {
    /// Reads the file; a missing file is an empty configuration.
    pub fn load(path: &Path) -> Result<Self, Failure> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(Failure::Usage(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        };
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml_ng::from_str(&text)
            .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))
    }

    /// Writes the file readable by its owner only (mode 0600, directory 0700):
    /// it holds tokens. Written whole to a temporary file, then renamed.
    pub fn save(&self, path: &Path) -> Result<(), Failure> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Failure::Usage(format!("cannot {what} {}: {e}", path.display()))
        };
        let text = serde_yaml_ng::to_string(self).map_err(|e| fail("write", &e))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            create_private_dir(dir).map_err(|e| fail("create the directory of", &e))?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let written = open_private(&tmp).and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail("write", &e));
        }
        Ok(())
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Where a command connects, after flags, environment and context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub urls: Vec<String>,
    pub token: Option<String>,
    /// The default queue of `pop` and `tail`.
    pub queue: Option<String>,
}

/// What the command line and the environment gave (flags win over the
/// environment already: clap reads `QUEEN_URL` and `QUEEN_TOKEN` as the
/// flags' fallbacks).
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub urls: Vec<String>,
    pub token: Option<String>,
    pub queue: Option<String>,
    /// `--context` or `QUEEN_CONTEXT`.
    pub context: Option<String>,
}

/// Flags, then the environment, then the context (`--context`, else the
/// current one), then the default URL.
pub fn resolve(given: Given, file: &ConfigFile) -> Result<Target, Failure> {
    let ctx = match &given.context {
        Some(name) => Some(file.contexts.get(name).ok_or_else(|| {
            Failure::Usage(format!(
                "no context {name} (queen config get-contexts lists them)"
            ))
        })?),
        None => file
            .current_context
            .as_ref()
            .and_then(|n| file.contexts.get(n)),
    };
    let ctx = ctx.cloned().unwrap_or_default();
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut urls: Vec<String> = given
        .urls
        .iter()
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        urls = ctx.url.as_deref().map(split).unwrap_or_default();
    }
    if urls.is_empty() {
        urls.push(DEFAULT_URL.to_owned());
    }
    Ok(Target {
        urls,
        token: given
            .token
            .filter(|t| !t.is_empty())
            .or(ctx.token.filter(|t| !t.is_empty())),
        queue: given.queue.filter(|q| !q.is_empty()).or(ctx.queue),
    })
}

/// Runs `queen config …`; `url` and `token` are the values given as flags
/// on this command line (for `set-context`).
pub fn run(
    cmd: ConfigCommand,
    url: Option<String>,
    token: Option<String>,
    format: Format,
) -> Result<(), Failure> {
    let path = path()?;
    let mut file = ConfigFile::load(&path)?;
    match cmd {
        ConfigCommand::SetContext { name, queue } => {
            if name.is_empty() {
                return Err(Failure::Usage("a context needs a name".into()));
            }
            let ctx = file.contexts.entry(name.clone()).or_default();
            let created = *ctx == Context::default();
            if url.is_none() && token.is_none() && queue.is_none() && !created {
                return Err(Failure::Usage(
                    "give --url, --token or --queue to change the context".into(),
                ));
            }
            ctx.url = url.or(ctx.url.take());
            ctx.token = token.or(ctx.token.take());
            ctx.queue = queue.or(ctx.queue.take());
            file.save(&path)?;
            if format.is_human() {
                let what = if created { "created" } else { "updated" };
                crate::outln!("context {name} {what} in {}", path.display());
            } else {
                output::machine(&json!({"context": name, "file": path}), format, "")?;
            }
        }
        ConfigCommand::UseContext { name } => {
            if !file.contexts.contains_key(&name) {
                return Err(Failure::Usage(format!(
                    "no context {name} (queen config get-contexts lists them)"
                )));
            }
            file.current_context = Some(name.clone());
            file.save(&path)?;
            if format.is_human() {
                crate::outln!("switched to context {name}");
            } else {
                output::machine(&json!({"currentContext": name}), format, "")?;
            }
        }
        ConfigCommand::GetContexts => {
            let list: Vec<_> = file
                .contexts
                .iter()
                .map(|(name, c)| {
                    json!({
                        "name": name,
                        "current": file.current_context.as_deref() == Some(name.as_str()),
                        "url": c.url,
                        "queue": c.queue,
                        "token": c.token.as_ref().map(|_| "set"),
                    })
                })
                .collect();
            output::show(&json!(list), format, "", |_, wide| {
                let mut t = Table::new(&["CURRENT", "NAME", "URL", "QUEUE", "TOKEN"]).wide(wide);
                for (name, c) in &file.contexts {
                    let current = file.current_context.as_deref() == Some(name.as_str());
                    t.row(vec![
                        if current { "*" } else { "" }.to_owned(),
                        name.clone(),
                        c.url.clone().unwrap_or_else(|| "-".into()),
                        c.queue.clone().unwrap_or_else(|| "-".into()),
                        if c.token.is_some() { "set" } else { "-" }.to_owned(),
                    ]);
                }
                t.print_or("no context");
            })?;
        }
        ConfigCommand::CurrentContext => match &file.current_context {
            Some(name) => output::show(&json!({"currentContext": name}), format, "", |_, _| {
                crate::outln!("{name}");
            })?,
            None => return Err(Failure::Usage("no current context".into())),
        },
        ConfigCommand::DeleteContext { name } => {
            if file.contexts.remove(&name).is_none() {
                return Err(Failure::Usage(format!("no context {name}")));
            }
            if file.current_context.as_deref() == Some(name.as_str()) {
                file.current_context = None;
            }
            file.save(&path)?;
            if format.is_human() {
                crate::outln!("deleted context {name}");
            } else {
                output::machine(&json!({"deleted": name}), format, "")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> ConfigFile {
        serde_yaml_ng::from_str(
            "current-context: prod\ncontexts:\n  prod:\n    url: http://a:1,http://b:2\n    token: t-prod\n    queue: orders\n  dev:\n    url: http://dev:1\n",
        )
        .unwrap()
    }

    #[test]
    fn flags_and_environment_win_over_the_context() {
        let t = resolve(Given::default(), &file()).unwrap();
        assert_eq!(t.urls, ["http://a:1", "http://b:2"]);
        assert_eq!(t.token.as_deref(), Some("t-prod"));
        assert_eq!(t.queue.as_deref(), Some("orders"));
        let given = Given {
            urls: vec!["http://flag:1".into()],
            token: Some("t-flag".into()),
            queue: Some("q".into()),
            context: None,
        };
        let t = resolve(given, &file()).unwrap();
        assert_eq!(t.urls, ["http://flag:1"]);
        assert_eq!(t.token.as_deref(), Some("t-flag"));
        assert_eq!(t.queue.as_deref(), Some("q"));
        let dev = Given {
            context: Some("dev".into()),
            ..Given::default()
        };
        let t = resolve(dev, &file()).unwrap();
        assert_eq!((t.urls[0].as_str(), t.token), ("http://dev:1", None));
        let none = resolve(Given::default(), &ConfigFile::default()).unwrap();
        assert_eq!(none.urls, [DEFAULT_URL]);
        let missing = Given {
            context: Some("nope".into()),
            ..Given::default()
        };
        assert!(resolve(missing, &file()).is_err());
    }

    #[test]
    fn unknown_keys_in_the_file_are_refused() {
        let e = serde_yaml_ng::from_str::<ConfigFile>("contexts:\n  a:\n    ulr: x\n").unwrap_err();
        assert!(e.to_string().contains("ulr"), "{e}");
    }
}
