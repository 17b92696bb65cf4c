#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! lease-core (docs written at the end)

pub mod drive;
pub mod http;
#[cfg(feature = "sigv4")]
pub mod sign;
pub mod store;
pub mod time;
