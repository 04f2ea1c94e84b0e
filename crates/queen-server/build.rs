//! Rebuilds the crate when a migration is added or edited: the migrations are
//! embedded by a macro, which cargo does not track on its own.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
