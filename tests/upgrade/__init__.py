"""Released versions upgraded in place (``ALTER EXTENSION nl2sql UPDATE`` from each release of
extension/releases.json), and pg_dump / pg_restore of a configured database."""
