//! The warnings a request collects on its way (admission, decoding, Pod
//! Security's warn mode, deprecated fields) and the answer carries as
//! `Warning: 299 - "..."` headers, which kubectl prints.

/// Warnings for the client (`Warning: 299 - "..."`), collected during a write.
#[derive(Clone, Debug, Default)]
pub struct Warnings(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Warnings {
    pub fn push(&self, w: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(w);
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
