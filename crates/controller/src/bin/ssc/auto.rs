//! The driver of the automatic path configuration live (`controller::auto_config`): every
//! [`TICK`] the SDC's port and member rates and the gateways' reports go into the
//! [`HopMeter`]; every `auto.period_s` the [`AutoConfig`] round runs on its measurements and
//! its changes are written to the store (one transaction each; the store then pushes flows and
//! gateway configs as for any change). Idle while no pair has it on.
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use controller::auto_config::AutoConfig;
use controller::measure::{limited_groups, loads_from_stats, HopMeter, Sample};
use controller::sdc::Sdc;
use controller::store::Store;
use controller::wrr::Wrr;

/// How often the measurements are sampled: the gateways report every 2 s, the SDC polls every
/// statistics interval (1 s by default).
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// Runs until aborted.
pub(crate) async fn auto_configure(store: Arc<Store>, sdc: Arc<Mutex<Sdc>>, wrr: Arc<Mutex<Wrr>>) {
    let catalog = store.subscribe();
    let meter = Arc::new(Mutex::new(HopMeter::new()));
    let auto = Arc::new(Mutex::new(AutoConfig::new()));
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let c = Arc::clone(&catalog.borrow());
        if !c.settings().auto.any() {
            continue;
        }
        let (store, sdc, wrr) = (Arc::clone(&store), Arc::clone(&sdc), Arc::clone(&wrr));
        let (meter, auto) = (Arc::clone(&meter), Arc::clone(&auto));
        // Max-flows over every candidate path: off the async threads.
        let r = tokio::task::spawn_blocking(move || {
            let now = Instant::now();
            let view = sdc.lock().unwrap_or_else(PoisonError::into_inner).view(now);
            let obs = wrr
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .observations();
            let (ports, members) = loads_from_stats(&view);
            let sample = Sample {
                ports,
                members,
                limited: limited_groups(now, &c.settings().adaptive, &obs),
            };
            let mut meter = meter.lock().unwrap_or_else(PoisonError::into_inner);
            meter.observe(now, c.inventory(), c.groups(), &sample);
            let mut auto = auto.lock().unwrap_or_else(PoisonError::into_inner);
            if !auto.due(c.settings(), now) {
                return;
            }
            let m = meter.measurements(now, c.inventory());
            for change in auto.step(c.settings(), now, c.inventory(), c.groups(), &m) {
                let g = &change.group;
                let members = g.members.values().cloned().collect();
                let what = if change.added { "added" } else { "replaced" };
                match store.update(|cat| cat.set_group(g.source, g.destination, g.id, members)) {
                    Ok(_) => tracing::info!(
                        source = g.source.get(),
                        destination = g.destination.get(),
                        group = g.id.get(),
                        "auto path configuration: {what} group {}>{} #{}: {}",
                        g.source,
                        g.destination,
                        g.id,
                        change.reason
                    ),
                    Err(e) => tracing::warn!(
                        source = g.source.get(),
                        destination = g.destination.get(),
                        group = g.id.get(),
                        error = %e,
                        "auto path configuration: the catalog refused the change ({})",
                        change.reason
                    ),
                }
            }
        })
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "automatic path configuration step failed");
        }
    }
}
