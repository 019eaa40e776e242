//! How many instances a function needs, from the calls in flight: Knative's
//! concurrency autoscaler (KPA) in small. Pure: observations in, a number out.
//!
//! ```text
//!   every second: average calls in flight over the last second ─▶ samples
//!   stable = ceil(mean over stableWindow / target)        (60 s by default)
//!   panic  = ceil(mean over stableWindow/10 / target)     (6 s)
//!   panic ≥ 2 × ready instances ─▶ panic mode for a stableWindow: follow `panic`, never scale down
//!   otherwise                    ─▶ follow `stable`
//!   no call for idleWindow       ─▶ 0 (then minScale);  any call within it ─▶ at least 1
//!   always within [minScale, maxScale]
//! ```

use minik8s_api::serverless::Scaling;
use std::collections::VecDeque;

/// Panic when the short window wants this many times the ready instances (Knative's 200 %).
pub const PANIC_THRESHOLD: f64 = 2.0;

#[derive(Debug, Default, Clone)]
pub struct Autoscaler {
    /// (time in seconds, mean concurrency over the second before it).
    samples: VecDeque<(f64, f64)>,
    /// Panic mode lasts until this time.
    panic_until: Option<f64>,
    /// The most instances wanted during this panic (it never scales down).
    panic_high: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub desired: u32,
    pub panicking: bool,
}

impl Autoscaler {
    /// Adds one sample: the mean calls in flight over the last period.
    pub fn record(&mut self, at: f64, concurrency: f64) {
        self.samples.push_back((at, concurrency));
    }

    /// The instances wanted at `now`; `ready` instances serve, `in_flight`
    /// calls are running, the last call arrived or ended at `last_call`.
    pub fn decide(
        &mut self,
        s: &Scaling,
        now: f64,
        ready: u32,
        in_flight: usize,
        last_call: Option<f64>,
    ) -> Decision {
        let stable_window = s.stable_window.as_secs_f64();
        let panic_window = (stable_window / 10.0).max(1.0);
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| *t <= now - stable_window)
        {
            self.samples.pop_front();
        }
        let mean = |window: f64| {
            let within: Vec<f64> = self
                .samples
                .iter()
                .filter(|(t, _)| *t > now - window)
                .map(|(_, c)| *c)
                .collect();
            if within.is_empty() {
                0.0
            } else {
                within.iter().sum::<f64>() / within.len() as f64
            }
        };
        let want = |c: f64| (c / s.target).ceil() as u32;
        let stable = want(mean(stable_window));
        let panic = want(mean(panic_window));
        if panic as f64 >= PANIC_THRESHOLD * ready.max(1) as f64 && panic > ready {
            self.panic_until = Some(now + stable_window);
        }
        let panicking = self.panic_until.is_some_and(|t| now < t);
        let mut desired = if panicking {
            self.panic_high = self.panic_high.max(panic).max(ready);
            self.panic_high
        } else {
            self.panic_until = None;
            self.panic_high = 0;
            stable
        };
        let idle =
            in_flight == 0 && last_call.is_none_or(|t| now - t >= s.idle_window.as_secs_f64());
        if idle {
            desired = 0;
            self.panic_until = None;
            self.panic_high = 0;
        } else {
            desired = desired.max(1);
        }
        Decision {
            desired: desired.clamp(s.min, s.max),
            panicking: panicking && !idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn scaling(min: u32, max: u32, target: f64) -> Scaling {
        Scaling {
            min,
            max,
            target,
            stable_window: Duration::from_secs(60),
            idle_window: Duration::from_secs(30),
        }
    }

    #[test]
    fn a_burst_panics_up_and_the_stable_window_brings_it_down() {
        let s = scaling(0, 10, 10.0);
        let mut a = Autoscaler::default();
        // Quiet: one call now and then keeps one instance.
        for t in 0..30 {
            a.record(t as f64, 0.5);
        }
        let d = a.decide(&s, 30.0, 1, 0, Some(29.0));
        assert_eq!(
            d,
            Decision {
                desired: 1,
                panicking: false
            }
        );
        // 40 callers at once: the 6 s window wants 4 ≥ 2 × 1 ready → panic to 4 at once.
        for t in 31..34 {
            a.record(t as f64, 40.0);
        }
        let d = a.decide(&s, 34.0, 1, 40, Some(34.0));
        assert!(d.panicking);
        assert!(d.desired >= 4, "{d:?}");
        let high = d.desired;
        // The burst ends: panic holds what it reached for a stable window.
        for t in 35..60 {
            a.record(t as f64, 1.0);
        }
        let d = a.decide(&s, 60.0, high, 1, Some(60.0));
        assert_eq!(
            d,
            Decision {
                desired: high,
                panicking: true
            }
        );
        // After the stable window: the 60 s mean (mostly 1) wants 1, the burst long gone.
        for t in 61..100 {
            a.record(t as f64, 1.0);
        }
        let d = a.decide(&s, 100.0, high, 1, Some(100.0));
        assert_eq!(
            d,
            Decision {
                desired: 1,
                panicking: false
            }
        );
    }

    #[test]
    fn idle_goes_to_zero_or_min_and_a_call_wakes_one() {
        let s = scaling(0, 10, 10.0);
        let mut a = Autoscaler::default();
        a.record(1.0, 0.2);
        assert_eq!(
            a.decide(&s, 2.0, 1, 0, Some(1.5)).desired,
            1,
            "called 0.5 s ago"
        );
        assert_eq!(
            a.decide(&s, 40.0, 1, 0, Some(1.5)).desired,
            0,
            "idle for 38.5 s ≥ 30 s"
        );
        assert_eq!(
            a.decide(&s, 41.0, 0, 1, Some(41.0)).desired,
            1,
            "a call in flight"
        );
        let kept = scaling(2, 10, 10.0);
        assert_eq!(
            a.decide(&kept, 400.0, 2, 0, None).desired,
            2,
            "minScale when idle"
        );
    }

    #[test]
    fn max_scale_caps_even_a_panic() {
        let s = scaling(0, 3, 1.0);
        let mut a = Autoscaler::default();
        for t in 0..5 {
            a.record(t as f64, 50.0);
        }
        let d = a.decide(&s, 5.0, 1, 50, Some(5.0));
        assert_eq!(d.desired, 3);
    }
}
