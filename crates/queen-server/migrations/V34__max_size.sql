-- maxSize enforced on push (issue 38, item 2). queen.push_batch takes which
-- items are bounded by their queue's maxSize (p_bounded) and answers the
-- bound of an item it refused (column bound), so its signature changes: the
-- old one is dropped here (IF EXISTS: a fresh install has no functions yet
-- when the migrations run) and sql/functions/push_batch.sql defines the new.
DROP FUNCTION IF EXISTS queen.push_batch(uuid[], text[], uuid[], text[], uuid[], text[], text[], boolean,
                                         timestamptz[]);
