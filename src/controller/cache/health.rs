//! Says which watched kinds cannot be listed or watched now: a gauge per kind, 1 while its
//! watch fails (forbidden, not served, a broken conversion webhook), 0 once it has listed.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::watch::Listing;

/// Labels of the gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The kind watched, plural (`Certificates`).
    pub kind: String,
}

/// Whether each watch fails.
#[derive(Clone, Debug, Default)]
pub struct Health {
    failing: Family<KindLabels, Gauge>,
}

impl Health {
    /// The gauges, for a registry.
    pub fn gauges(&self) -> Family<KindLabels, Gauge> {
        self.failing.clone()
    }

    /// What the watch of `kind` reports its listing to.
    pub fn listing(&self, kind: &'static str) -> impl Fn(Listing) + Send + Sync + Clone + 'static {
        let failing = self.failing.clone();
        move |listing| {
            let labels = KindLabels {
                kind: kind.to_string(),
            };
            failing
                .get_or_create(&labels)
                .set(i64::from(matches!(listing, Listing::Failed(_))));
        }
    }

    /// Whether the watch of `kind` fails now.
    pub fn failing(&self, kind: &str) -> bool {
        let labels = KindLabels {
            kind: kind.to_string(),
        };
        self.failing.get_or_create(&labels).get() == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_fails_until_it_lists_again() {
        let health = Health::default();
        let report = health.listing("Certificates");
        assert!(!health.failing("Certificates"));
        report(Listing::Failed("forbidden".into()));
        assert!(health.failing("Certificates"));
        assert!(!health.failing("ServiceMonitors"));
        report(Listing::Listed);
        assert!(!health.failing("Certificates"));
    }
}
