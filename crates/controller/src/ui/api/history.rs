//! SDC (issue #19): `GET /api/v1/history`, the last minutes of rates per member path, path
//! group and pair, and the adaptive path-group events, as [`crate::history`] keeps them in
//! memory (what the web dashboard at `/ui/` draws).
use axum::extract::State;
use axum::Json;

use super::common::AppState;
use crate::history::HistoryView;

pub(super) async fn history(State(state): State<AppState>) -> Json<HistoryView> {
    Json(
        state
            .history
            .as_ref()
            .map_or_else(HistoryView::default, |h| {
                h.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .view()
            }),
    )
}
