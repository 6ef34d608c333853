//! Which proxy, if any, the operator's API client goes through, by the rules client-go follows
//! for a controller-runtime operator (`http.ProxyFromEnvironment`): a `proxy-url` the
//! kubeconfig names for its cluster is used as named; otherwise `HTTPS_PROXY` (or
//! `https_proxy`), unless the API server is `localhost` or a loopback address, or `NO_PROXY`
//! (or `no_proxy`) covers its host: a name and its subdomains, a `.domain`, an IP address, a
//! CIDR block or `*`, matched by hyper-util's proxy matcher (curl's rules).
//!
//! OLM copies a cluster-wide proxy's `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` into every
//! operator it installs, and OpenShift's `NO_PROXY` names the service network and `.svc`, so
//! in a cluster the API server is reached directly; out of one, a workstation's proxy is used
//! for a remote API server, as kubectl uses it. kube's own loader reads `HTTPS_PROXY` for a
//! kubeconfig only, and matches `NO_PROXY` against the proxy rather than the API server
//! (kube-client 5.0.0, `ConfigLoader::proxy_url`), so the route is settled here instead.

use http::Uri;
use hyper_util::client::proxy::matcher::Matcher;
use std::net::IpAddr;
use thiserror::Error;

/// A proxy variable that names no proxy the client can use.
#[derive(Debug, Error)]
#[error("{name}={value:?} is not a proxy URL (http://HOST:PORT or socks5://HOST:PORT): {reason}")]
pub struct ProxyError {
    name: &'static str,
    value: String,
    reason: String,
}

/// The proxy variables of an environment: the first set and non-empty of each pair, as
/// client-go reads them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProxyVariables {
    /// `HTTPS_PROXY`, else `https_proxy`: the variable's name and its value.
    https: Option<(&'static str, String)>,
    /// `NO_PROXY`, else `no_proxy`.
    no: Option<String>,
}

impl ProxyVariables {
    /// The process's own.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Those `lookup` returns.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let first = |names: [&'static str; 2]| {
            names.into_iter().find_map(|name| {
                lookup(name)
                    .filter(|value| !value.trim().is_empty())
                    .map(|value| (name, value))
            })
        };
        ProxyVariables {
            https: first(["HTTPS_PROXY", "https_proxy"]),
            no: first(["NO_PROXY", "no_proxy"]).map(|(_, value)| value),
        }
    }

    /// The proxy `HTTPS_PROXY` names, `http://` when it names no scheme (as Go reads it).
    fn https_proxy(&self) -> Result<Option<Uri>, ProxyError> {
        let Some((name, value)) = &self.https else {
            return Ok(None);
        };
        let value = value.trim();
        let error = |reason: String| ProxyError {
            name,
            value: value.to_string(),
            reason,
        };
        let with_scheme = if value.contains("://") {
            value.to_string()
        } else {
            format!("http://{value}")
        };
        let uri: Uri = with_scheme.parse().map_err(|e| error(format!("{e}")))?;
        let host_port = uri
            .authority()
            .map_or("", |authority| authority.as_str())
            .rsplit('@')
            .next()
            .unwrap_or_default();
        if let Some((_, port)) = host_port.rsplit_once(':')
            && !port.ends_with(']')
            && port.parse::<u16>().is_err()
        {
            return Err(error(format!("its port {port:?} is not a number")));
        }
        match uri.scheme_str() {
            Some("http" | "socks5") if uri.host().is_some() => Ok(Some(uri)),
            Some("http" | "socks5") => Err(error("it names no host".into())),
            other => Err(error(format!(
                "the scheme {} is not one the client speaks",
                other.unwrap_or_default()
            ))),
        }
    }

    /// Whether the API server at `cluster` is reached directly whatever the proxy: it is
    /// `localhost` or a loopback address, or `NO_PROXY` covers its host.
    fn exempts(&self, cluster: &Uri, proxy: &Uri) -> bool {
        let Some(host) = cluster.host() else {
            return true;
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.eq_ignore_ascii_case("localhost")
            || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        {
            return true;
        }
        let matcher = Matcher::builder()
            .https(proxy.to_string())
            .no(self.no.clone().unwrap_or_default())
            .build();
        let https = Uri::builder()
            .scheme("https")
            .authority(cluster.authority().map_or(host, |a| a.as_str()))
            .path_and_query("/")
            .build();
        https.is_ok_and(|https| matcher.intercept(&https).is_none())
    }
}

/// How the client reaches the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Directly, with or without proxy variables set: why.
    Direct(&'static str),
    /// Through this proxy, and where it was named.
    Proxy(Uri, &'static str),
}

impl Route {
    /// The proxy, if the route goes through one.
    pub fn proxy(&self) -> Option<&Uri> {
        match self {
            Route::Proxy(proxy, _) => Some(proxy),
            Route::Direct(_) => None,
        }
    }
}

/// Settles how a client of `config` reaches its API server, and sets `config.proxy_url` to
/// match. `config` comes from kube's inference: its `proxy_url` is the kubeconfig's
/// `proxy-url`, or `HTTPS_PROXY` as kube read it.
pub fn route(config: &mut kube::Config, variables: &ProxyVariables) -> Result<Route, ProxyError> {
    let from_env = variables.https_proxy()?;
    let as_kube_read = variables
        .https
        .as_ref()
        .and_then(|(_, value)| value.parse::<Uri>().ok());
    let named = config
        .proxy_url
        .take()
        .filter(|url| Some(url) != as_kube_read.as_ref());
    let route = match (named, from_env) {
        (Some(named), _) => Route::Proxy(named, "the kubeconfig's proxy-url"),
        (None, None) => Route::Direct("no proxy is set"),
        (None, Some(proxy)) if variables.exempts(&config.cluster_url, &proxy) => Route::Direct(
            "the API server is on a loopback address or localhost, or NO_PROXY covers it",
        ),
        (None, Some(proxy)) => Route::Proxy(proxy, variables.https.as_ref().map_or("", |v| v.0)),
    };
    config.proxy_url = route.proxy().cloned();
    Ok(route)
}

/// `proxy` without its credentials, for a log line.
pub fn shown(proxy: &Uri) -> String {
    let host = proxy.host().unwrap_or_default();
    match (proxy.scheme_str(), proxy.port_u16()) {
        (Some(scheme), Some(port)) => format!("{scheme}://{host}:{port}"),
        (Some(scheme), None) => format!("{scheme}://{host}"),
        (None, _) => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variables(pairs: &[(&str, &str)]) -> ProxyVariables {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        ProxyVariables::from_lookup(move |name| {
            pairs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, value)| value.clone())
        })
    }

    fn config(cluster: &str, proxy_url: Option<&str>) -> kube::Config {
        let mut config = kube::Config::new(cluster.parse().expect("a cluster URL"));
        config.proxy_url = proxy_url.map(|url| url.parse().expect("a proxy URL"));
        config
    }

    fn route_of(cluster: &str, proxy_url: Option<&str>, pairs: &[(&str, &str)]) -> Route {
        let mut config = config(cluster, proxy_url);
        let route = route(&mut config, &variables(pairs)).expect("a route");
        assert_eq!(
            config.proxy_url.as_ref(),
            route.proxy(),
            "the config follows the route"
        );
        route
    }

    fn proxied(route: &Route) -> Option<String> {
        route.proxy().map(Uri::to_string)
    }

    /// OpenShift's NO_PROXY for a cluster with the default networks.
    const OPENSHIFT_NO_PROXY: &str = ".cluster.local,.svc,10.128.0.0/14,127.0.0.1,\
        172.30.0.0/16,api-int.example.com,localhost";

    #[test]
    fn in_a_cluster_the_service_network_in_no_proxy_keeps_the_api_server_direct() {
        let pairs = [
            ("HTTPS_PROXY", "http://proxy.example.com:3128"),
            ("NO_PROXY", OPENSHIFT_NO_PROXY),
        ];
        assert!(matches!(
            route_of("https://172.30.0.1:443", None, &pairs),
            Route::Direct(_)
        ));
        assert!(matches!(
            route_of("https://kubernetes.default.svc", None, &pairs),
            Route::Direct(_)
        ));
        assert!(matches!(
            route_of("https://api-int.example.com:6443", None, &pairs),
            Route::Direct(_)
        ));
    }

    #[test]
    fn an_api_server_no_proxy_does_not_cover_goes_through_the_proxy() {
        let pairs = [
            ("HTTPS_PROXY", "http://proxy.example.com:3128"),
            ("NO_PROXY", OPENSHIFT_NO_PROXY),
        ];
        assert_eq!(
            proxied(&route_of("https://10.96.0.1:443", None, &pairs)).as_deref(),
            Some("http://proxy.example.com:3128/")
        );
        assert_eq!(
            proxied(&route_of("https://api.example.org:6443", None, &pairs)).as_deref(),
            Some("http://proxy.example.com:3128/")
        );
        // A name covers its subdomains, not a longer name ending the same way.
        let pairs = [("https_proxy", "proxy:3128"), ("no_proxy", "example.org")];
        assert!(matches!(
            route_of("https://api.example.org", None, &pairs),
            Route::Direct(_)
        ));
        assert_eq!(
            proxied(&route_of("https://api.notexample.org", None, &pairs)).as_deref(),
            Some("http://proxy:3128/"),
            "no scheme is http, as Go reads it"
        );
    }

    #[test]
    fn loopback_and_localhost_are_never_proxied_as_client_go_never_does() {
        let pairs = [("HTTPS_PROXY", "http://proxy.example.com:3128")];
        for cluster in [
            "https://127.0.0.1:6443",
            "https://127.0.3.7:6443",
            "https://[::1]:6443",
            "https://localhost:6443",
        ] {
            assert!(
                matches!(route_of(cluster, None, &pairs), Route::Direct(_)),
                "{cluster}"
            );
        }
    }

    #[test]
    fn a_star_in_no_proxy_and_no_variable_at_all_both_mean_direct() {
        let star = [("HTTPS_PROXY", "http://proxy:3128"), ("NO_PROXY", "*")];
        assert!(matches!(
            route_of("https://api.example.org", None, &star),
            Route::Direct(_)
        ));
        assert_eq!(
            route_of("https://api.example.org", None, &[]),
            Route::Direct("no proxy is set")
        );
        // HTTP_PROXY is for plain-HTTP destinations: the API server is HTTPS.
        let http_only = [("HTTP_PROXY", "http://proxy:3128")];
        assert!(matches!(
            route_of("https://api.example.org", None, &http_only),
            Route::Direct(_)
        ));
    }

    #[test]
    fn the_upper_case_variable_wins_and_an_empty_one_counts_as_unset() {
        let pairs = [
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:2"),
        ];
        assert_eq!(
            proxied(&route_of("https://api.example.org", None, &pairs)).as_deref(),
            Some("http://upper:1/")
        );
        let pairs = [("HTTPS_PROXY", " "), ("https_proxy", "http://lower:2")];
        assert_eq!(
            proxied(&route_of("https://api.example.org", None, &pairs)).as_deref(),
            Some("http://lower:2/")
        );
    }

    #[test]
    fn the_kubeconfigs_own_proxy_url_is_kept_whatever_no_proxy_says() {
        let pairs = [("HTTPS_PROXY", "http://env-proxy:3128"), ("NO_PROXY", "*")];
        assert_eq!(
            route_of(
                "https://api.example.org",
                Some("socks5://named:1080"),
                &pairs
            ),
            Route::Proxy(
                "socks5://named:1080".parse().expect("a URI"),
                "the kubeconfig's proxy-url"
            )
        );
        // What kube read from HTTPS_PROXY itself is settled by the rules above.
        assert!(matches!(
            route_of(
                "https://api.example.org",
                Some("http://env-proxy:3128"),
                &pairs
            ),
            Route::Direct(_)
        ));
    }

    #[test]
    fn a_proxy_variable_that_names_no_usable_proxy_is_refused_with_its_name() {
        for (value, reason) in [
            ("ftp://proxy:21", "the scheme ftp"),
            ("http://", "empty string"),
            ("http://proxy:port", "its port \"port\" is not a number"),
            ("http://user:pass@proxy:31x8", "its port \"31x8\""),
        ] {
            let mut config = config("https://api.example.org", None);
            let error = route(&mut config, &variables(&[("https_proxy", value)]))
                .expect_err(value)
                .to_string();
            assert!(
                error.starts_with(&format!("https_proxy={value:?} is not a proxy URL")),
                "{error}"
            );
            assert!(error.contains(reason), "{value}: {error}");
        }
    }

    #[test]
    fn a_proxy_is_shown_without_its_credentials() {
        let proxy: Uri = "http://user:secret@proxy.example.com:3128"
            .parse()
            .expect("a URI");
        assert_eq!(shown(&proxy), "http://proxy.example.com:3128");
    }
}
