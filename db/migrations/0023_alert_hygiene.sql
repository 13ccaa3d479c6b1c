-- Alert hygiene.
--
-- alert_after_failures: a task's failure alerts start at its Nth failed
-- execution in a row (consecutive_failures, which a success resets); 1 is
-- every failure, as before.
--
-- failure_alerted: a failure alert was queued since the task's last
-- success. The success that ends such a streak queues an
-- execution.recovered alert and clears it, in the statement that resets
-- consecutive_failures; a task that never alerted pays nothing for it (the
-- success paths read it only where they already read the count).
ALTER TABLE tasks
    ADD COLUMN alert_after_failures integer NOT NULL DEFAULT 1 CHECK (alert_after_failures >= 1),
    ADD COLUMN failure_alerted boolean NOT NULL DEFAULT false;
