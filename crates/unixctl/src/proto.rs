//! JSON-RPC 1.0 messages as unixctl uses them: requests with string parameters, replies whose
//! result or error is a string. Keys are written in the order OVS writes them.

use std::io;

use serde_json::Value;

/// A request as received; `params` are checked for being strings by the caller, after the
/// command's argument count (the order in which OVS reports problems).
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Vec<Value>,
}

/// A message that is not a usable request: the id to answer with (null if unknown) and why.
/// The connection cannot be trusted afterwards, so the server closes it after replying.
#[derive(Debug)]
pub(crate) struct BadRequest {
    pub(crate) id: Value,
    pub(crate) reason: String,
}

pub(crate) fn parse_request(frame: &[u8]) -> Result<Request, BadRequest> {
    let bad = |id: Value, reason: String| BadRequest { id, reason };
    let value: Value = serde_json::from_slice(frame)
        .map_err(|e| bad(Value::Null, format!("invalid JSON-RPC message: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(bad(
            Value::Null,
            "invalid JSON-RPC message: not a JSON object".into(),
        ));
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        _ if obj.contains_key("result") || obj.contains_key("error") => {
            return Err(bad(
                id,
                "invalid JSON-RPC request: this socket accepts requests, not replies".into(),
            ));
        }
        _ => {
            return Err(bad(
                id,
                "invalid JSON-RPC request: \"method\" must be a string".into(),
            ));
        }
    };
    let params = match obj.remove("params") {
        Some(Value::Array(p)) => p,
        _ => {
            return Err(bad(
                id,
                "invalid JSON-RPC request: \"params\" must be an array".into(),
            ));
        }
    };
    if id.is_null() {
        return Err(bad(
            id,
            "invalid JSON-RPC request: \"id\" is required (notifications are not supported)".into(),
        ));
    }
    Ok(Request { id, method, params })
}

/// `{"id":ID,"result":TEXT,"error":null}` or, as OVS writes errors, `{"id":ID,"error":TEXT}`.
pub(crate) fn encode_reply(id: &Value, outcome: &Result<String, String>) -> Vec<u8> {
    let id = id.to_string();
    match outcome {
        Ok(text) => format!(r#"{{"id":{id},"result":{},"error":null}}"#, json_str(text)),
        Err(text) => format!(r#"{{"id":{id},"error":{}}}"#, json_str(text)),
    }
    .into_bytes()
}

/// `{"id":ID,"method":METHOD,"params":[ARGS...]}`.
pub(crate) fn encode_request<S: AsRef<str>>(id: u64, method: &str, args: &[S]) -> Vec<u8> {
    let params: Vec<String> = args.iter().map(|a| json_str(a.as_ref())).collect();
    format!(
        r#"{{"id":{id},"method":{},"params":[{}]}}"#,
        json_str(method),
        params.join(",")
    )
    .into_bytes()
}

/// Interprets a reply to request `id`: `Ok(Ok(result))`, `Ok(Err(error))`, or `InvalidData`.
pub(crate) fn decode_reply(frame: &[u8], id: u64) -> io::Result<Result<String, String>> {
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let value: Value = serde_json::from_slice(frame)
        .map_err(|e| invalid(format!("invalid JSON-RPC reply: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(invalid("invalid JSON-RPC reply: not an object".into()));
    };
    match obj.get("id") {
        Some(Value::Number(n)) if n.as_u64() == Some(id) => {}
        other => {
            let got = other.map_or_else(|| "none".to_string(), Value::to_string);
            return Err(invalid(format!(
                "JSON-RPC reply has id {got}, expected {id}"
            )));
        }
    }
    match (obj.get("result"), obj.get("error")) {
        (_, Some(Value::String(e))) => Ok(Err(e.clone())),
        (Some(Value::String(r)), None | Some(Value::Null)) => Ok(Ok(r.clone())),
        (r, e) => Err(invalid(format!(
            "JSON-RPC reply needs a string result or error, got result {} and error {}",
            r.map_or_else(|| "none".to_string(), Value::to_string),
            e.map_or_else(|| "none".to_string(), Value::to_string),
        ))),
    }
}

fn json_str(s: &str) -> String {
    Value::from(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_as_ovs_appctl_sends_it() {
        let req =
            parse_request(br#"{"id":0,"method":"dpif/show-stats","params":["br0","x"]}"#).unwrap();
        assert_eq!(req.id, Value::from(0));
        assert_eq!(req.method, "dpif/show-stats");
        assert_eq!(req.params, vec![Value::from("br0"), Value::from("x")]);
        assert_eq!(
            encode_request(0, "dpif/show-stats", &["br0", "x"]),
            br#"{"id":0,"method":"dpif/show-stats","params":["br0","x"]}"#
        );
    }

    #[test]
    fn any_non_null_id_is_echoed() {
        let req = parse_request(br#"{"id":[1,{"a":"b"}],"method":"m","params":[]}"#).unwrap();
        assert_eq!(
            encode_reply(&req.id, &Ok("x\n".into())),
            br#"{"id":[1,{"a":"b"}],"result":"x\n","error":null}"#
        );
    }

    #[test]
    fn reply_encoding_matches_ovs() {
        assert_eq!(
            encode_reply(&Value::from(0), &Ok("a \"q\"\n".into())),
            br#"{"id":0,"result":"a \"q\"\n","error":null}"#
        );
        assert_eq!(
            encode_reply(&Value::from(7), &Err("bad\n".into())),
            br#"{"id":7,"error":"bad\n"}"#
        );
    }

    #[test]
    fn bad_requests_say_why() {
        let reason = |m: &[u8]| parse_request(m).unwrap_err().reason;
        assert!(reason(b"{bad json}").starts_with("invalid JSON-RPC message: "));
        assert!(reason(br#"{"id":1,"params":[]}"#).contains("\"method\" must be a string"));
        assert!(reason(br#"{"id":1,"method":5,"params":[]}"#).contains("\"method\""));
        assert!(reason(br#"{"id":1,"method":"m"}"#).contains("\"params\" must be an array"));
        assert!(reason(br#"{"id":1,"method":"m","params":{}}"#).contains("\"params\""));
        assert!(reason(br#"{"method":"m","params":[]}"#).contains("\"id\" is required"));
        assert!(reason(br#"{"id":null,"method":"m","params":[]}"#).contains("\"id\""));
        assert!(reason(br#"{"id":1,"result":"x","error":null}"#).contains("not replies"));
        // The id is kept for the error reply when there is one.
        let bad = parse_request(br#"{"id":4,"method":"m"}"#).unwrap_err();
        assert_eq!(bad.id, Value::from(4));
    }

    #[test]
    fn reply_decoding() {
        assert_eq!(
            decode_reply(br#"{"id":3,"result":"ok\n","error":null}"#, 3).unwrap(),
            Ok("ok\n".into())
        );
        assert_eq!(
            decode_reply(br#"{"id":3,"error":"no"}"#, 3).unwrap(),
            Err("no".into())
        );
        assert_eq!(
            decode_reply(br#"{"id":3,"result":null,"error":"no"}"#, 3).unwrap(),
            Err("no".into())
        );
        for bad in [
            &br#"{"id":4,"result":"ok","error":null}"#[..],
            br#"{"result":"ok","error":null}"#,
            br#"{"id":3,"result":5,"error":null}"#,
            br#"{"id":3,"result":null,"error":5}"#,
            br#"{"id":3}"#,
            b"{nope}",
        ] {
            let err = decode_reply(bad, 3).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{:?}", bad);
        }
    }
}
