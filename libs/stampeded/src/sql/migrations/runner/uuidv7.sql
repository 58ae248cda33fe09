-- For a server before PostgreSQL 18, whose pg_catalog has no uuidv7(): UUID
-- version 7 as RFC 9562 lays it out and as PostgreSQL 18 draws it, a 48-bit
-- Unix millisecond timestamp, then 12 bits of the sub-millisecond fraction
-- (so that ids drawn one after another sort in the order they were drawn,
-- to the microsecond), then the variant and 62 random bits. The seed's
-- column defaults find it in the schema; unqualified uuidv7() still means
-- pg_catalog's once the server has one.
CREATE FUNCTION uuidv7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
               int8send((t.us / 1000) << 16 | 28672 | ((t.us % 1000) * 4096 / 1000))
               || substring(uuid_send(gen_random_uuid()) FROM 9),
               'hex')::uuid
      FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us) t
$$;
DO $$ BEGIN
    EXECUTE format('COMMENT ON FUNCTION %I.uuidv7() IS %L', current_schema(),
                   'Stampeded: UUID version 7, for a PostgreSQL before 18, whose pg_catalog has none');
END $$;
