-- Settings: the declaration (py_udf/nl2sql/settings.py: name, type, default, meaning) is put
-- here by scripts/build_extension.py; nl2sql.setting holds only the values a user set.

-- Every setting with its effective value, its default and whether it was changed.
CREATE OR REPLACE VIEW nl2sql.settings AS
    SELECT d.name, COALESCE(s.value, d.default_value) AS value, d.default_value, d.type,
           s.key IS NOT NULL AS changed, d.meaning
    FROM (
    @SETTINGS_VALUES@
    ) AS d(name, type, default_value, meaning)
    LEFT JOIN nl2sql.setting s ON s.key = d.name;
COMMENT ON VIEW nl2sql.settings IS
    'nl2sql: every setting with its effective value, default, type and meaning';
GRANT SELECT ON nl2sql.settings TO PUBLIC;

-- Back to the declared default: the user's row goes. Returns the default.
CREATE OR REPLACE FUNCTION nl2sql.reset_setting(key text) RETURNS text
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    _default text;
BEGIN
    SELECT d.default_value INTO _default FROM nl2sql.settings d WHERE d.name = reset_setting.key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'nl2sql: unknown setting "%"', reset_setting.key
            USING HINT = 'SELECT name FROM nl2sql.settings lists the settings';
    END IF;
    DELETE FROM nl2sql.setting s WHERE s.key = reset_setting.key;
    RETURN _default;
END
$$;
COMMENT ON FUNCTION nl2sql.reset_setting(text) IS
    'nl2sql: forget a changed setting (it takes its declared default again); returns the default';
REVOKE EXECUTE ON FUNCTION nl2sql.reset_setting(text) FROM PUBLIC;
