"""``ScrubJayChatMemory``: a classic-chain ``BaseMemory`` (needs ``scrubjay-mem[classic]``).

``BaseMemory`` left langchain-core for ``langchain-classic``; this module is the only one that
imports it, so ``import langchain_scrubjay`` works without the extra.
"""

from __future__ import annotations

from typing import Any

from langchain_classic.base_memory import BaseMemory
from pydantic import ConfigDict, Field
from scrubjay import ScrubJayMemory

from ._search import filtered_search

__all__ = ["ScrubJayChatMemory"]


class ScrubJayChatMemory(BaseMemory):
    """Classic-chain memory: saves each exchange, loads the relevant non-stale memories.

    Setup:
        .. code-block:: bash

            pip install "scrubjay-mem[classic]"

    Key init args:
        memory: ScrubJayMemory
            Where the exchanges are remembered.
        conversation: str
            The conversation's name; saved as each memory's context and used as the query
            context.
        k: int
            How many memories to load per turn.

    Instantiate:
        .. code-block:: python

            from langchain_scrubjay import ScrubJayChatMemory

            chat_memory = ScrubJayChatMemory(memory=mem, conversation="chat with alice")

    Invoke:
        .. code-block:: python

            chat_memory.save_context({"input": "I'm parked on level 3"}, {"output": "Noted."})
            chat_memory.load_memory_variables({"input": "where is my car?"})

        .. code-block:: none

            {'history': "Human: I'm parked on level 3\\nAI: Noted."}

    Use within a chain:
        Pass it as ``memory=`` to a classic ``ConversationChain`` / ``LLMChain`` whose prompt
        has a ``{history}`` variable.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: ScrubJayMemory
    """The live memory the exchanges are saved to."""
    conversation: str = "conversation"
    """The conversation's name: the context ("where") of every saved turn and of each query."""
    k: int = Field(default=4, gt=0)
    """How many memories to load per turn."""
    memory_key: str = "history"
    """Name of the prompt variable that receives the memories."""
    input_key: str | None = None
    """The input holding the user's message (default: the only input not a memory variable)."""
    output_key: str | None = None
    """The output holding the reply (default: the only output)."""
    human_prefix: str = "Human"
    """Label of the user's turns."""
    ai_prefix: str = "AI"
    """Label of the model's turns."""

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    def _input(self, inputs: dict[str, Any]) -> str:
        if self.input_key is not None:
            return str(inputs[self.input_key])
        keys = [k for k in inputs if k not in (self.memory_key, "stop")]
        if len(keys) != 1:
            raise ValueError("ScrubJayChatMemory needs input_key= when a chain has several "
                             f"inputs. Got {sorted(keys)}.")
        return str(inputs[keys[0]])

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, str]:
        """The ``k`` best non-stale memories for the current input, one ``Role: text`` a line."""
        hits = filtered_search(self.memory, self._input(inputs), self.k,
                               context=self.conversation, keep=lambda h: not h.stale)
        lines = [f"{h.record.metadata.get('role', self.human_prefix)}: {h.text}" for h in hits]
        return {self.memory_key: "\n".join(lines)}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Remember the user's message and the reply, with the conversation as context."""
        if self.output_key is not None:
            reply = outputs[self.output_key]
        elif len(outputs) == 1:
            reply = next(iter(outputs.values()))
        else:
            raise ValueError("ScrubJayChatMemory needs output_key= when a chain has several "
                             f"outputs. Got {sorted(outputs)}.")
        turns = [(self.human_prefix, self._input(inputs)), (self.ai_prefix, str(reply))]
        self.memory.add_many([{"text": text, "context": self.conversation,
                               "metadata": {"role": role}} for role, text in turns if text.strip()])

    def clear(self) -> None:
        """Forget every memory of the namespace."""
        self.memory.forget_namespace()
