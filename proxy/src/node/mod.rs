//! The node proxy role (`--proxy-type ztunnel`): one proxy per node serving
//! the ambient pods of that node, as ztunnel does in its shared (in-pod) mode.
//!
//! `wds` fills `state` from workload discovery (the ADS client of `crate::xds`
//! with a store of its own); `rbac` decides L4 authorization from the
//! policies in that state.

pub mod app;
pub mod inpod;
pub mod pods;
pub mod rbac;
pub mod state;
pub mod traffic;
pub mod wds;

#[cfg(test)]
mod state_tests;

pub use state::{WorkloadSnapshot, WorkloadState};
pub use wds::WorkloadStore;
