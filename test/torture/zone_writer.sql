-- One zone writer's session (shape_and_zones.sh): inserts of timestamptz keys
-- with microseconds, each followed by the delete of a row another session
-- (another TimeZone) created, a transaction each.
DO $$
DECLARE
    k bigint;
BEGIN
    FOR i IN 1..50 LOOP
        k := nextval('torture.zone_seq');
        INSERT INTO public.zoned (at, n, zone)
        VALUES (timestamptz '2026-03-29 00:59:59.999999+00' + k * interval '17 minutes 0.000123 seconds', k,
                current_setting('TimeZone'));
        DELETE FROM public.zoned WHERE (at, n) IN (SELECT at, n FROM public.zoned
                                                   WHERE zone <> current_setting('TimeZone')
                                                   ORDER BY n LIMIT 1 FOR UPDATE SKIP LOCKED);
        COMMIT;
    END LOOP;
END
$$;
