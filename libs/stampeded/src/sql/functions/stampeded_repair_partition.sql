-- Gives a partition back the triggers it should have, and its counts.
--
-- stampeded_partition_health() finds a partition without its notify or
-- counter triggers (one attached by hand, or restored from a dump taken with
-- --section=pre-data); this repairs it. Only the missing triggers are created,
-- so a half-repaired partition (some counter triggers present) does not fail
-- on the ones it has. While the counter triggers were missing the partition's
-- rows went uncounted, so its queues are recounted afterwards: a repaired
-- trigger with a stale base would count from the wrong number forever.
CREATE OR REPLACE FUNCTION stampeded_repair_partition(p_partition text)
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_rel      regclass := to_regclass(format('%I', p_partition));
    v_repaired text[] := '{}';
    v_queue    text;
BEGIN
    IF v_rel IS NULL THEN
        RETURN v_repaired;
    END IF;

    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_notify_insert_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_notify_insert_trg AFTER INSERT ON %I'
            '  REFERENCING NEW TABLE AS inserted'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_notify_insert()', p_partition);
        v_repaired := v_repaired || 'stampeded_notify_insert_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_ins_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_ins_trg AFTER INSERT ON %I'
            '  REFERENCING NEW TABLE AS added'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_delta()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_ins_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_upd_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_upd_trg AFTER UPDATE ON %I'
            '  REFERENCING NEW TABLE AS added OLD TABLE AS removed'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_delta()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_upd_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_del_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_del_trg AFTER DELETE ON %I'
            '  REFERENCING OLD TABLE AS removed'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_delta()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_del_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_trunc_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_trunc_trg AFTER TRUNCATE ON %I'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_truncate()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_trunc_trg'::text;
    END IF;

    IF cardinality(v_repaired) > 0 THEN
        FOR v_queue IN EXECUTE format('SELECT DISTINCT queue FROM %I', p_partition) LOOP
            PERFORM stampeded_recount_queue(v_queue);
        END LOOP;
    END IF;
    RETURN v_repaired;
END;
$$;
