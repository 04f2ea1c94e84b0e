//! Rebuilds the crate when a file under `migrations/` or `sql/` is added,
//! removed or edited: refinery's macro embeds the migrations without telling
//! cargo, and `include_str!` tracks only the function files that already
//! exist.
//!
//! Sets `QUEEN_COMMIT`, the commit `queen-server --version` and `/health`
//! report: the variable of that name when the build is given one (an image
//! built without the repository's `.git`), else `git rev-parse --short=12
//! HEAD`, else `unknown`. It is read again when the checkout's HEAD moves.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=sql");
    println!("cargo:rerun-if-env-changed=QUEEN_COMMIT");
    let commit = std::env::var("QUEEN_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            // HEAD, and the branch file it names, change with every commit
            if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                let branch = git(&["symbolic-ref", "-q", "HEAD"]);
                // a path that does not exist would rerun this script on every build
                for file in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
                    let path = format!("{dir}/{file}");
                    if std::path::Path::new(&path).is_file() {
                        println!("cargo:rerun-if-changed={path}");
                    }
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=QUEEN_COMMIT={commit}");
}
