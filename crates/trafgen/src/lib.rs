//! flowpath's traffic generator: streams of packets built from templates (hex, a capture's
//! first packet, or layers described in a stream file) with fields varied per flow, sent at a
//! set rate on any port flowpath has and counted where they come back: loss, reordering and
//! latency from a stamp each packet carries at its tail; RFC 2544 no-drop-rate search.
//!
//! It talks to ports only (the datapath's [`datapath::port::Port`]), never to the switch's
//! internals, so it measures flowpath and any other switch alike.
#![forbid(unsafe_code)]

pub mod build;
pub mod engine;
pub mod inproc;
pub mod loopback;
pub mod ndr;
pub mod stamp;
pub mod stats;
pub mod stream;
