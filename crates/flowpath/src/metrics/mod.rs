//! The Prometheus metrics endpoint: `GET http://LISTEN/metrics` answers the switch's
//! counters in Prometheus's text format, or OpenMetrics when the scraper asks for it.
//!
//! - [`http`]: the HTTP/1.1 server on its own threads, bounded against slow or flooding
//!   clients;
//! - [`exposition`]: the text formats, each family's HELP and TYPE written once;
//! - [`collect`]: what a scrape reads (per PMD, port and queue, drops by reason, megaflows,
//!   conntrack, OpenFlow tables, tunnels) and its names.
//!
//! The listen address comes from the configuration file's `[metrics] listen` or, under
//! `--ovsdb`, from Open_vSwitch `other_config:metrics-listen`, and can change while the
//! switch runs ([`Metrics::set_listen`]). An address that cannot be listened on is logged
//! and the switch runs on without the endpoint.

pub(crate) mod collect;
pub(crate) mod exposition;
pub(crate) mod http;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;

use http::{Handler, HttpServer};

/// The endpoint of a running switch: where it listens now, if anywhere.
pub(crate) struct Metrics {
    handler: Handler,
    server: Mutex<Option<HttpServer>>,
}

impl Metrics {
    /// The endpoint of switch `dp` + `of`, not listening yet.
    pub fn new(dp: Arc<Mutex<Datapath>>, of: Arc<Ofproto>) -> Metrics {
        Metrics {
            handler: Arc::new(move |format| collect::scrape(&dp, &of, format)),
            server: Mutex::new(None),
        }
    }

    /// Listens on `addr` (`None`: nowhere), closing the previous socket when the address
    /// changes. A failure (the port in use, an address not on this host) is logged and
    /// returned; the endpoint then listens nowhere.
    pub fn set_listen(&self, addr: Option<SocketAddr>) -> Result<(), String> {
        let mut server = self.server.lock().unwrap_or_else(|e| e.into_inner());
        let current = server.as_ref().map(HttpServer::local_addr);
        if addr.is_some() && addr == current {
            return Ok(());
        }
        if let Some(old) = server.take() {
            let was = old.local_addr();
            old.stop();
            log(vlog::Level::Info, &format!("stopped listening on {was}"));
        }
        let Some(addr) = addr else {
            return Ok(());
        };
        match HttpServer::start(addr, self.handler.clone()) {
            Ok(s) => {
                let msg = format!("listening on http://{}/metrics", s.local_addr());
                log(vlog::Level::Info, &msg);
                *server = Some(s);
                Ok(())
            }
            Err(e) => {
                let msg = format!("cannot listen on {addr}: {e}; the metrics endpoint is off");
                log(vlog::Level::Err, &msg);
                Err(msg)
            }
        }
    }
}

/// Parses a listen address, `IP:PORT` (`[IPv6]:PORT`).
pub(crate) fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not an address to listen on: expected IP:PORT, e.g. 127.0.0.1:9477")
    })
}

/// Logs under `metrics`.
fn log(level: vlog::Level, msg: &str) {
    if let Some(m) = vlog::module("metrics") {
        m.log(level, msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(
            parse_listen("127.0.0.1:9477").unwrap(),
            "127.0.0.1:9477".parse::<SocketAddr>().unwrap()
        );
        assert!(parse_listen("[::1]:9477").is_ok());
        for bad in ["localhost:9477", "127.0.0.1", "127.0.0.1:99999", ""] {
            let e = parse_listen(bad).unwrap_err();
            assert!(e.contains("expected IP:PORT"), "{e}");
        }
    }
}
