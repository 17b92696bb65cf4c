#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! lease-core (docs written at the end)

pub mod config;
pub mod drive;
pub mod elector;
pub mod entropy;
pub mod http;
pub mod lease;
pub mod machine;
pub mod mem;
pub mod record;
#[cfg(feature = "sigv4")]
pub mod sign;
pub mod store;
pub mod time;
