-- For a server before PostgreSQL 16. The dedup key is a generated column,
-- whose expression must be immutable; date_trunc() with a time zone is from
-- PostgreSQL 16 on (the same result for the same arguments: the zone is one
-- of them). Before 16 the seed finds this one, which says so, through a
-- search_path that puts the schema before pg_catalog while the seed runs.
-- An immutable SQL function of one expression is inlined: the key costs
-- what it costs on 16.
CREATE FUNCTION date_trunc(text, timestamptz, text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT pg_catalog.date_trunc($1, $2, $3)
$$;
-- Qualified: unqualified, date_trunc() is pg_catalog's.
DO $$ BEGIN
    EXECUTE format('COMMENT ON FUNCTION %I.date_trunc(text, timestamptz, text) IS %L', current_schema(),
                   'Stampeded: date_trunc() with a time zone, immutable as from PostgreSQL 16, for the dedup key''s generated column');
END $$;
