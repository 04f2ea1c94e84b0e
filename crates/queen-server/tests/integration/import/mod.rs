//! `queen-server import` (issue 35): a reference 0.15 database built from
//! the sheet's facts (`reference/`), imported, then consumed through this
//! broker; runs again, interrupted runs, and refused inputs.
//! `compat/python/import.sh` consumes the same import through the official
//! Python client.

mod consume;
mod refusals;
mod runs;
mod support;
