//! Shared test fixtures. Each integration test binary uses a part of it.
#![allow(dead_code)]

pub mod corpus;
pub mod http_server;
pub mod process;
pub mod sshd;
pub mod tls;
