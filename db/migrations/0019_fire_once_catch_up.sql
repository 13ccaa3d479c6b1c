-- fire_once: one late fire (the catch-up) stands for every slot of its task
-- that was due when it started. caught_up_at is when the task's latest
-- catch-up started: a misfire whose slot is at or before it is missed.
-- Written in the transaction that starts the catch-up, under the task's
-- row lock that every fire_once misfire decision takes first, so that two
-- slots of a task crossing the misfire threshold while a backlog drains
-- do not both fire. Nullable, no default: no table rewrite.
ALTER TABLE tasks ADD COLUMN caught_up_at timestamptz;
