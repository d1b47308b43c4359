//! A candidate's scoring state during [`super::Scorer::choose`]: its jobs
//! (masked copies), the partial sum that bounds its NDD from below, and the
//! rules that prune and reorder candidates by those bounds.

/// Margin below which a partial sum does not prune: sums of the same
/// positive terms in another order differ by far less than this.
pub(super) const PRUNE_MARGIN: f64 = 1e-9;

/// One masked copy to score: the neighbour `k` of the original, its
/// position `k2` in the edited text, its weight and its distance.
#[derive(Debug, Clone, Copy)]
pub(super) struct Job {
    pub(super) k: usize,
    pub(super) k2: usize,
    pub(super) w: f64,
    pub(super) d: usize,
}

/// Scoring state of one candidate of one span.
pub(super) struct Tally {
    /// Jobs in the order the full sum adds them (by `k`).
    pub(super) jobs: Vec<Job>,
    /// Indices into `jobs`, nearest neighbours first.
    pub(super) order: Vec<usize>,
    /// Divergence per job, once computed.
    pub(super) div: Vec<f64>,
    /// How many of `order` are done.
    pub(super) done: usize,
    /// Sum of the weighted divergences done so far (a lower bound).
    pub(super) partial: f64,
    /// Dropped because its lower bound exceeds a complete candidate's NDD.
    pub(super) pruned: bool,
}

impl Tally {
    pub(super) fn complete(&self) -> bool {
        self.done == self.jobs.len()
    }

    /// The NDD, summed in the same order as a full evaluation.
    pub(super) fn total(&self) -> f64 {
        self.jobs
            .iter()
            .zip(&self.div)
            .fold(0.0, |acc, (j, d)| acc + j.w * d)
    }
}

/// The complete candidate with the smallest NDD, if any is complete.
pub(super) fn best_complete(per: &[Tally]) -> Option<&Tally> {
    per.iter()
        .filter(|t| t.complete())
        .min_by(|a, b| a.total().total_cmp(&b.total()))
}

/// Drops the incomplete candidates whose lower bound exceeds the smallest
/// complete NDD (by more than [`PRUNE_MARGIN`]: sums of the same terms in
/// another order may differ in their last bits).
pub(super) fn prune(per: &mut [Tally]) {
    let bound = best_complete(per).map_or(f64::INFINITY, Tally::total);
    for t in per.iter_mut().filter(|t| !t.complete()) {
        if t.partial > bound * (1.0 + PRUNE_MARGIN) {
            t.pruned = true;
        }
    }
}

/// Jobs per candidate in the first round of [`Scorer::choose`]: the nearest
/// neighbour on each side.
pub(super) const FIRST_JOBS: usize = 2;

/// How the step of [`Scorer::choose`]'s later rounds grows (1, 1, 2, 3, 5,
/// 7, 11, ... jobs per survivor and round).
pub(super) const STEP_GROWTH: f64 = 1.5;

/// Orders the jobs left to each survivor by the weighted divergence the
/// best complete candidate got at the same neighbour (largest first,
/// nearest among equals). Candidates of one span share their neighbours
/// (job `x` is the same position `k` in all of them), and a neighbour the
/// edit moved a lot in one candidate tends to move in the others, so the
/// lower bounds pass the best NDD after fewer jobs. Any order is exact:
/// every term is non-negative.
pub(super) fn reorder(per: &mut [Tally]) {
    let Some(best) = best_complete(per) else {
        return;
    };
    let key: Vec<f64> = best
        .jobs
        .iter()
        .zip(&best.div)
        .map(|(j, d)| j.w * d)
        .collect();
    for t in per.iter_mut().filter(|t| !t.pruned && !t.complete()) {
        let jobs = &t.jobs;
        t.order[t.done..].sort_by(|&a, &b| {
            key[b]
                .total_cmp(&key[a])
                .then((jobs[a].d, a).cmp(&(jobs[b].d, b)))
        });
    }
}
