//! The interactive terminal UI.
pub mod history;
pub mod view;
