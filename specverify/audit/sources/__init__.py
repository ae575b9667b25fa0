"""What an audit samples: the adapters over users' implementations (kernels, round steps,
generators, subprocesses), language-model generators audited against a computed law, HTTP
endpoints, and transformers' own speculative features."""
