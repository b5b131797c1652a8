//! `OFPST_TABLE_FEATURES` as `ovs-vswitchd` 3.1 answers it: its 254 tables with the same
//! instructions, actions, next tables and fields ([`table_fields`](super::table_fields)).

use openflow::header::Version;
use openflow::msgs::table_features::{self, FieldLists, OxmId, ovs_tables};
use openflow::msgtype::{EncodeError, Message};

use super::bridge_view::N_TABLES;
use super::table_fields::{MATCHES, OF15_HEADERS, SET_FIELDS, WILDCARDS};

/// The fields `ids` in `version`: OpenFlow 1.5 names some by its own headers (only in the
/// match and wildcard lists, as OVS lists them).
fn oxms(ids: &[(u32, Option<u32>)], version: Version) -> Vec<OxmId> {
    ids.iter()
        .map(|&id| {
            let renamed = OF15_HEADERS.iter().find(|(old, _)| *old == id);
            match renamed {
                Some(&(_, header)) if version >= Version::Of15 => OxmId {
                    header,
                    experimenter: None,
                },
                _ => OxmId {
                    header: id.0,
                    experimenter: id.1,
                },
            }
        })
        .collect()
}

/// The fields of every table in `version`.
fn fields(version: Version) -> FieldLists {
    FieldLists {
        set_fields: oxms(&SET_FIELDS, Version::Of13),
        matches: oxms(&MATCHES, version),
        wildcards: oxms(&WILDCARDS, version),
    }
}

/// The replies to the table features request `request` (a query) of `version`.
pub(crate) fn reply(request: &Message<'_>, version: Version) -> Result<Vec<Vec<u8>>, EncodeError> {
    table_features::encode_reply(request, &ovs_tables(version, N_TABLES, &fields(version)))
}
