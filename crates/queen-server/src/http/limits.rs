//! What a client may send, checked once at the edge (docs/operations.md,
//! "Limits"): text that reaches PostgreSQL (names, ids, the token's `sub`)
//! holds no NUL character (PostgreSQL `text` cannot) and has a bounded
//! length; payloads must come back as sent (`queen_proto::payload`).

use serde_json::{Map, Value};

use super::error::ApiError;

/// Longest name (queue, partition, group, namespace, task, token subject) in characters.
pub const MAX_NAME_CHARS: usize = queen_proto::names::MAX_NAME_CHARS;

/// Refuses text with a NUL character or longer than `max_chars`, naming `field`.
pub fn check_text(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    if value.contains('\0') {
        return Err(nul_error(field));
    }
    // bytes first: the character count is only needed near the limit
    if value.len() > max_chars && value.chars().count() > max_chars {
        return Err(ApiError::bad_request(format!(
            "{field} must be at most {max_chars} characters"
        )));
    }
    Ok(())
}

/// The answer to a NUL character in `field`.
pub fn nul_error(field: &str) -> ApiError {
    ApiError::bad_request(format!("{field} must not contain NUL characters"))
}

/// Refuses a body with a NUL in a string outside message payloads, naming the field.
pub fn check_body_strings(map: &Map<String, Value>) -> Result<(), ApiError> {
    match queen_proto::payload::nul_field(map) {
        None => Ok(()),
        Some(field) => Err(nul_error(&field)),
    }
}

/// Refuses a payload that cannot be returned as sent (400 with the reason).
pub fn check_payload(raw: &str, max_depth: usize) -> Result<(), ApiError> {
    queen_proto::payload::check_payload(raw, max_depth)
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_bounded() {
        assert!(check_text("group", &"g".repeat(255), 255).is_ok());
        assert_eq!(
            check_text("group", &"g".repeat(256), 255)
                .unwrap_err()
                .message,
            "group must be at most 255 characters"
        );
        assert_eq!(
            check_text("sub", "a\0", 255).unwrap_err().message,
            "sub must not contain NUL characters"
        );
    }
}
