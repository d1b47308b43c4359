//! The type bytes of protocol 3 messages, named by direction: the same
//! byte means different messages either way (`D` is a client's Describe
//! and a server's DataRow, `C` a Close and a CommandComplete, `E` an
//! Execute and an ErrorResponse), so the state machine never matches on
//! a bare byte.

use std::fmt;

/// The type of a message from the client (the frontend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrontendTag {
    /// `Q`: a simple-protocol query string.
    Query,
    /// `P`: Parse, a prepared statement.
    Parse,
    /// `B`: Bind, a portal.
    Bind,
    /// `E`: Execute a portal.
    Execute,
    /// `D`: Describe a statement or portal.
    Describe,
    /// `C`: Close a statement or portal.
    Close,
    /// `S`: Sync, the end of an extended-protocol batch.
    Sync,
    /// `H`: Flush.
    Flush,
    /// `X`: Terminate.
    Terminate,
    /// `F`: FunctionCall.
    FunctionCall,
    /// Anything else (COPY data, a password message out of place...).
    Other(u8),
}

impl FrontendTag {
    /// The tag of type byte `b`.
    pub fn of(b: u8) -> Self {
        match b {
            b'Q' => FrontendTag::Query,
            b'P' => FrontendTag::Parse,
            b'B' => FrontendTag::Bind,
            b'E' => FrontendTag::Execute,
            b'D' => FrontendTag::Describe,
            b'C' => FrontendTag::Close,
            b'S' => FrontendTag::Sync,
            b'H' => FrontendTag::Flush,
            b'X' => FrontendTag::Terminate,
            b'F' => FrontendTag::FunctionCall,
            other => FrontendTag::Other(other),
        }
    }

    /// Its type byte.
    pub fn byte(self) -> u8 {
        match self {
            FrontendTag::Query => b'Q',
            FrontendTag::Parse => b'P',
            FrontendTag::Bind => b'B',
            FrontendTag::Execute => b'E',
            FrontendTag::Describe => b'D',
            FrontendTag::Close => b'C',
            FrontendTag::Sync => b'S',
            FrontendTag::Flush => b'H',
            FrontendTag::Terminate => b'X',
            FrontendTag::FunctionCall => b'F',
            FrontendTag::Other(b) => b,
        }
    }

    /// Whether it is an extended-protocol message that opens (or goes on
    /// with) a batch a `Sync` ends.
    pub fn in_batch(self) -> bool {
        matches!(
            self,
            FrontendTag::Parse
                | FrontendTag::Bind
                | FrontendTag::Execute
                | FrontendTag::Describe
                | FrontendTag::Close
                | FrontendTag::Flush
        )
    }
}

impl fmt::Display for FrontendTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", char::from(self.byte()))
    }
}

/// The type of a message from the server (the backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendTag {
    /// `T`: the columns of a result.
    RowDescription,
    /// `n`: a statement or portal that returns no rows, described.
    NoData,
    /// `t`: the parameter types of a statement, described.
    ParameterDescription,
    /// `D`: one row.
    DataRow,
    /// `C`: a statement completed.
    CommandComplete,
    /// `I`: an empty query string.
    EmptyQueryResponse,
    /// `s`: an Execute reached its row limit.
    PortalSuspended,
    /// `1`: a Parse succeeded.
    ParseComplete,
    /// `2`: a Bind succeeded.
    BindComplete,
    /// `3`: a Close succeeded.
    CloseComplete,
    /// `E`: an error.
    ErrorResponse,
    /// `N`: a notice.
    NoticeResponse,
    /// `Z`: ready for the next query, with the transaction status.
    ReadyForQuery,
    /// `S`: a setting the server reports.
    ParameterStatus,
    /// `A`: a LISTEN notification.
    NotificationResponse,
    /// Anything else (COPY, function call results...).
    Other(u8),
}

impl BackendTag {
    /// The tag of type byte `b`.
    pub fn of(b: u8) -> Self {
        match b {
            b'T' => BackendTag::RowDescription,
            b'n' => BackendTag::NoData,
            b't' => BackendTag::ParameterDescription,
            b'D' => BackendTag::DataRow,
            b'C' => BackendTag::CommandComplete,
            b'I' => BackendTag::EmptyQueryResponse,
            b's' => BackendTag::PortalSuspended,
            b'1' => BackendTag::ParseComplete,
            b'2' => BackendTag::BindComplete,
            b'3' => BackendTag::CloseComplete,
            b'E' => BackendTag::ErrorResponse,
            b'N' => BackendTag::NoticeResponse,
            b'Z' => BackendTag::ReadyForQuery,
            b'S' => BackendTag::ParameterStatus,
            b'A' => BackendTag::NotificationResponse,
            other => BackendTag::Other(other),
        }
    }

    /// Its type byte.
    pub fn byte(self) -> u8 {
        match self {
            BackendTag::RowDescription => b'T',
            BackendTag::NoData => b'n',
            BackendTag::ParameterDescription => b't',
            BackendTag::DataRow => b'D',
            BackendTag::CommandComplete => b'C',
            BackendTag::EmptyQueryResponse => b'I',
            BackendTag::PortalSuspended => b's',
            BackendTag::ParseComplete => b'1',
            BackendTag::BindComplete => b'2',
            BackendTag::CloseComplete => b'3',
            BackendTag::ErrorResponse => b'E',
            BackendTag::NoticeResponse => b'N',
            BackendTag::ReadyForQuery => b'Z',
            BackendTag::ParameterStatus => b'S',
            BackendTag::NotificationResponse => b'A',
            BackendTag::Other(b) => b,
        }
    }

    /// Whether it answers a message of the client (and so is past every
    /// `Flush` before that message); errors, notices, rows, settings and
    /// notifications are not taken as such an answer.
    pub fn answers_a_message(self) -> bool {
        !matches!(
            self,
            BackendTag::DataRow
                | BackendTag::ErrorResponse
                | BackendTag::NoticeResponse
                | BackendTag::NotificationResponse
                | BackendTag::ParameterStatus
        )
    }
}

impl fmt::Display for BackendTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", char::from(self.byte()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_through_its_tag_either_way() {
        for b in 0..=u8::MAX {
            assert_eq!(FrontendTag::of(b).byte(), b);
            assert_eq!(BackendTag::of(b).byte(), b);
        }
        // One byte, two messages.
        assert_eq!(FrontendTag::of(b'D'), FrontendTag::Describe);
        assert_eq!(BackendTag::of(b'D'), BackendTag::DataRow);
        assert_eq!(FrontendTag::of(b'E'), FrontendTag::Execute);
        assert_eq!(BackendTag::of(b'E'), BackendTag::ErrorResponse);
    }
}
