"""Studies: what runs agents again or retrains arms to answer a question about the result —
the alignment protocols (`alignment`), models refit on simulated data (`augmentation`, A/B
Agent Table 5), rounds of living agents (`rounds`) and the papers' experiments
(`experiments`), and the report that sets the read-out beside the protocols' trust
(`report_writer`), opening on the verdict built from all of them (`verdict`).  The read-out (`ops.readout`) only reads what the lifecycle and these studies
stored."""
