"""The transaction coordinator (KIP-98): transactional ids, __transaction_state, markers."""
