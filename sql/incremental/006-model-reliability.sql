-- Per-model reliability learned from judged answers (nl2sql.calibrate()): one row per model
-- and level ('all', or a Spider hardness level of the PreSQL). judged/right count the judged
-- candidates of that model; weight is what its vote counts (log-odds of its smoothed
-- accuracy); voter says whether the model is in the learned voter set of that level (NULL:
-- no learned set). in_use: calibration found the learned vote better than a plain majority on
-- held-out judged questions; only then does the vote use these rows.
-- Rows can come from judged answers of other databases or a benchmark (calibrate(judged)),
-- which this database cannot recompute: pg_dump keeps them.
CREATE TABLE nl2sql.model_reliability (
    model          text NOT NULL,
    level          text NOT NULL CHECK (level IN ('all', 'easy', 'medium', 'hard', 'extra')),
    judged         integer NOT NULL CHECK (judged >= 0),
    "right"        integer NOT NULL CHECK ("right" >= 0 AND "right" <= judged),
    weight         float8 NOT NULL CHECK (weight > 0),
    voter          boolean,
    in_use         boolean NOT NULL,
    calibrated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, level)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.model_reliability', '');
