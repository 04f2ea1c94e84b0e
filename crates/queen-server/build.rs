//! Rebuilds the crate when a file under `migrations/` or `sql/` is added,
//! removed or edited: refinery's macro embeds the migrations without telling
//! cargo, and `include_str!` tracks only the function files that already
//! exist. The schema test embeds the frozen pre-baseline history the same way.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=sql");
    println!("cargo:rerun-if-changed=tests/fixtures/pre_baseline_migrations");
}
