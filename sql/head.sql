-- Runs first in every install and upgrade script (scripts/build_extension.py puts it there).
--
-- nl2sql.migration records each file of sql/incremental/ that has run in this database, with
-- its text and the version that ran it: an incremental file runs exactly once per database,
-- whatever path (install, upgrades) led to the current version. It is not dumped by pg_dump:
-- a restore runs CREATE EXTENSION, which applies every migration again from scratch.
DO $nl2sql_head$
BEGIN
    IF pg_catalog.to_regclass('nl2sql.migration') IS NULL THEN
        CREATE TABLE nl2sql.migration (
            name               text PRIMARY KEY,
            applied_at_version text NOT NULL,
            applied_at         timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
            body               text NOT NULL
        );
        REVOKE ALL ON nl2sql.migration FROM PUBLIC;
    END IF;
END
$nl2sql_head$;
