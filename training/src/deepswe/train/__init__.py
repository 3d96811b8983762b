"""deepswe.train: GRPO++ algorithm, rollouts, trainer, engines and backends."""
