//! OpenFlow port numbers for a bridge's interfaces, chosen as `ovs-vswitchd` chooses them
//! (`iface_pick_ofport()` in `vswitchd/bridge.c`): a valid `ofport_request` (1 to 65279)
//! first; else the number the port already has while it runs; else the `ofport` the database
//! kept from an earlier run, so that numbers survive a restart; else the lowest free number.
//! The bridge's own interface is LOCAL (65534).

use std::collections::BTreeSet;

use ofproto::syntax::OFPP_LOCAL;

/// The highest number a port may ask for (`OFPP_MAX` − 1: 0xff00 and up are reserved).
pub(crate) const OFPORT_MAX: i64 = 65279;

/// What one interface brings to the choice of its number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Claim {
    /// Its bridge's own interface: always LOCAL.
    pub local: bool,
    /// `ofport_request`.
    pub request: Option<i64>,
    /// The number it has in the running switch.
    pub running: Option<u32>,
    /// The `ofport` column (a -1 of a failed interface counts as none).
    pub db: Option<i64>,
}

fn valid(n: Option<i64>) -> Option<u32> {
    n.filter(|n| (1..=OFPORT_MAX).contains(n)).map(|n| n as u32)
}

/// The numbers of a bridge's interfaces, in `claims`' order: each claim in turn, a requested
/// number goes to the first interface that asks for it, a kept one (running, then from the
/// database) to the first that had it, and the rest take the lowest numbers left.
pub(crate) fn allocate(claims: &[Claim]) -> Vec<u32> {
    let mut out: Vec<Option<u32>> = vec![None; claims.len()];
    let mut taken = BTreeSet::new();
    for (o, c) in out.iter_mut().zip(claims) {
        if c.local {
            *o = Some(OFPP_LOCAL);
        }
    }
    let passes: [fn(&Claim) -> Option<u32>; 3] = [
        |c| valid(c.request),
        |c| {
            c.running
                .filter(|&n| n != OFPP_LOCAL && i64::from(n) <= OFPORT_MAX)
        },
        |c| valid(c.db),
    ];
    for pass in passes {
        for (o, c) in out.iter_mut().zip(claims) {
            if o.is_none()
                && let Some(n) = pass(c)
                && taken.insert(n)
            {
                *o = Some(n);
            }
        }
    }
    let mut next = 1;
    out.into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                while taken.contains(&next) {
                    next += 1;
                }
                taken.insert(next);
                next
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(n: i64) -> Claim {
        Claim {
            request: Some(n),
            ..Claim::default()
        }
    }

    #[test]
    fn requests_then_kept_numbers_then_the_lowest_free() {
        let claims = [
            Claim::default(),
            req(7),
            Claim {
                db: Some(2),
                ..Claim::default()
            },
            Claim {
                local: true,
                ..Claim::default()
            },
            Claim::default(),
        ];
        assert_eq!(allocate(&claims), vec![1, 7, 2, OFPP_LOCAL, 3]);
    }

    #[test]
    fn a_request_wins_over_a_number_kept_from_the_database() {
        let claims = [
            Claim {
                db: Some(5),
                ..Claim::default()
            },
            req(5),
        ];
        assert_eq!(allocate(&claims), vec![1, 5]);
    }

    #[test]
    fn a_running_port_keeps_its_number_over_the_database() {
        let claims = [
            Claim {
                db: Some(3),
                ..Claim::default()
            },
            Claim {
                running: Some(3),
                db: Some(9),
                ..Claim::default()
            },
        ];
        assert_eq!(allocate(&claims), vec![1, 3]);
    }

    #[test]
    fn out_of_range_and_duplicate_requests_are_ignored() {
        let claims = [req(0), req(65280), req(-1), req(4), req(4)];
        assert_eq!(allocate(&claims), vec![1, 2, 3, 4, 5]);
        let failed = Claim {
            db: Some(-1),
            ..Claim::default()
        };
        assert_eq!(allocate(&[failed]), vec![1]);
    }
}
