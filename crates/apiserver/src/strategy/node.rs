//! Node: a kubelet registers its Node with the status it observed.

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn keeps_status_on_create(&self) -> bool {
        true
    }
}
