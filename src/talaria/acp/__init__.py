"""`talaria acp`: the agent for editors that speak the Agent Client Protocol (Zed, JetBrains...).

A thin client of the engine's event protocol: each ACP session is one talaria Agent whose
events become session updates and whose approval requests become permission requests. The
`acp` SDK is imported only here, so `import talaria` never pays for it.
"""
