//! One informer per kind per process, shared by every controller that needs it
//! (client-go's SharedInformerFactory): each controller asks for the caches and
//! registers its event handlers, then the process starts all informers once.
//!
//! ```text
//!   ReplicaSet ctl ─┐ cache::<Pod>(), on_event::<Pod>(..)
//!   Endpoints ctl  ─┼──────────────▶  SharedInformers ──start()──▶ one LIST+WATCH per kind
//!   GC             ─┘
//! ```
//!
//! Every cache is indexed by namespace (index name [`NAMESPACE_INDEX`]).

use crate::informer::{Cache, Event, IndexFn, Informer};
use crate::rest::{Api, Client, ListParams, Resource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// The index every shared cache has: namespace → objects.
pub const NAMESPACE_INDEX: &str = "namespace";

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One kind's informer (until started) and its cache.
trait Slot: Send {
    fn as_any(&mut self) -> &mut dyn Any;
    /// The informer's run loop, once; `None` when already started.
    fn take_task(&mut self) -> Option<Task>;
    fn synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

struct TypedSlot<K> {
    informer: Option<Informer<K>>,
    cache: Cache<K>,
}

impl<K> Slot for TypedSlot<K>
where
    K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
    fn take_task(&mut self) -> Option<Task> {
        self.informer.take().map(|i| Box::pin(i.run()) as Task)
    }
    fn synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let cache = self.cache.clone();
        Box::pin(async move { cache.wait_synced().await })
    }
}

/// The process's informers, keyed by the object type.
pub struct SharedInformers {
    client: Client,
    slots: Mutex<HashMap<TypeId, Box<dyn Slot>>>,
}

impl SharedInformers {
    pub fn new(client: &Client) -> SharedInformers {
        SharedInformers {
            client: client.clone(),
            slots: Mutex::default(),
        }
    }

    /// The client the informers list and watch with (for an informer of
    /// its own, e.g. field-selected, beside the shared ones).
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn with_slot<K, R>(&self, f: impl FnOnce(&mut TypedSlot<K>) -> R) -> R
    where
        K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots.entry(TypeId::of::<K>()).or_insert_with(|| {
            let informer = Informer::new(Api::<K>::all(&self.client), ListParams::default());
            let by_namespace: IndexFn<K> =
                Arc::new(|o: &K| vec![o.metadata().namespace.clone().unwrap_or_default()]);
            informer.cache().add_index(NAMESPACE_INDEX, by_namespace);
            let cache = informer.cache();
            Box::new(TypedSlot {
                informer: Some(informer),
                cache,
            })
        });
        let typed = slot
            .as_any()
            .downcast_mut::<TypedSlot<K>>()
            .expect("slots are keyed by their type");
        f(typed)
    }

    /// The shared cache of `K` (its informer is created on first use).
    pub fn cache<K>(&self) -> Cache<K>
    where
        K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        self.with_slot::<K, _>(|s| s.cache.clone())
    }

    /// Adds an event handler for `K`. Handlers must be added before [`start`](Self::start):
    /// a handler added later would miss the events already delivered, so it is refused.
    pub fn on_event<K>(
        &self,
        f: impl Fn(&Event<K>) + Send + Sync + 'static,
    ) -> Result<(), AlreadyStarted>
    where
        K: Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        self.with_slot::<K, _>(|s| match s.informer.as_mut() {
            Some(i) => {
                i.on_event(f);
                Ok(())
            }
            None => Err(AlreadyStarted(std::any::type_name::<K>())),
        })
    }

    /// Spawns every informer not yet running (one LIST+WATCH per kind).
    pub fn start(&self) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        for slot in slots.values_mut() {
            if let Some(task) = slot.take_task() {
                tokio::spawn(task);
            }
        }
    }

    /// Waits until every cache has its first LIST.
    pub async fn wait_synced(&self) {
        let waits: Vec<_> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.values().map(|s| s.synced()).collect()
        };
        futures::future::join_all(waits).await;
    }

    /// How many kinds are watched (one watch each).
    pub fn kinds(&self) -> usize {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// A handler was added after the informers started.
#[derive(Debug, thiserror::Error)]
#[error("event handler for {0} added after the shared informers started")]
pub struct AlreadyStarted(&'static str);

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    #[tokio::test]
    async fn one_informer_per_kind_and_late_handlers_are_refused() {
        let f = SharedInformers::new(&Client::new("http://127.0.0.1:9"));
        let a = f.cache::<Pod>();
        f.on_event::<Pod>(|_| {}).unwrap();
        let b = f.cache::<Pod>();
        assert_eq!(f.kinds(), 1);
        // Both handles are the same cache.
        a.upsert(Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }));
        assert!(b.get("ns/p").is_some());
        assert_eq!(b.by_index(NAMESPACE_INDEX, "ns").len(), 1);
        f.start();
        assert!(f.on_event::<Pod>(|_| {}).is_err());
    }
}
