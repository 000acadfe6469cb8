"""Sources in: the one submission path, the incremental pipeline, jobs and the queue, the
webhook, ingestion state (sources, verify) and background index builds."""
