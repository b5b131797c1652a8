//! `OFPST_TABLE_FEATURES` as `ovs-vswitchd` 3.1 answers it: its 254 tables with the same
//! instructions, actions, next tables and fields ([`table_fields`](super::table_fields)).

use openflow::header::Version;
use openflow::msgs::table_features::{self, FieldLists, OxmId, ovs_tables};
use openflow::msgtype::{EncodeError, Message};

use super::bridge_view::N_TABLES;
use super::table_fields::{MATCHES_OF13, MATCHES_OF15, SET_FIELDS, WILDCARDS_OF13, WILDCARDS_OF15};

fn oxms(ids: &[(u32, Option<u32>)]) -> Vec<OxmId> {
    ids.iter()
        .map(|&(header, experimenter)| OxmId {
            header,
            experimenter,
        })
        .collect()
}

/// The fields of every table in `version`.
fn fields(version: Version) -> FieldLists {
    let (matches, wildcards) = if version >= Version::Of15 {
        (&MATCHES_OF15[..], &WILDCARDS_OF15[..])
    } else {
        (&MATCHES_OF13[..], &WILDCARDS_OF13[..])
    };
    FieldLists {
        set_fields: oxms(&SET_FIELDS),
        matches: oxms(matches),
        wildcards: oxms(wildcards),
    }
}

/// The replies to the table features request `request` (a query) of `version`.
pub(crate) fn reply(request: &Message<'_>, version: Version) -> Result<Vec<Vec<u8>>, EncodeError> {
    table_features::encode_reply(request, &ovs_tables(version, N_TABLES, &fields(version)))
}
