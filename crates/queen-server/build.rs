//! Rebuilds the crate when a file under `migrations/` or `sql/` is added,
//! removed or edited: refinery's macro embeds the migrations without telling
//! cargo, and `include_str!` tracks only the function files that already
//! exist.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=sql");
}
