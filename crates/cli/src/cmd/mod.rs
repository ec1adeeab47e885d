//! One module per subcommand: each collects what it needs and folds it into a result that a
//! view renders.

pub mod devices;
pub mod doctor;
pub mod fits;
pub mod ghosts;
pub mod ps;
pub mod run;
#[cfg(feature = "serve")]
pub mod serve;
pub mod spill;
pub mod watch;
