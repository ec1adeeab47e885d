//! RAM: the calling process's resident set, another process's (and its proportional set
//! size), and the host's memory. The functions are at the crate root too; this module keeps
//! the 0.2.x path `hypomnesis::ram::process_rss`.

pub use crate::host::memory::host::{HostMemory, host_memory};
pub use crate::host::memory::process_rss;
pub use crate::host::process::{process_pss_of, process_rss_of};
