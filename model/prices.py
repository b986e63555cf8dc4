"""What the providers' models cost per million tokens, and the setting that overrides it.

Each figure says where it was read and when (2026-11-25, from a stored copy of the page named;
where that is a third party's page it quotes the provider's own, named beside it). A model
not here costs "price unknown" (None), never 0: local, custom and demo models included, unless
the `prices` setting names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from utils.settings import PriceSetting


@dataclass(frozen=True)
class Price:
    """Per million tokens, in `currency`."""

    input: float
    cached_input: float
    output: float
    currency: str


# The provider presets' models (model/providers.py), as each provider lists its standard rate.
KNOWN_PRICES: dict[str, Price] = {
    # https://tokenmix.ai/blog/deepseek-api-pricing (checked 2026-04-30 against
    # https://api-docs.deepseek.com/quick_start/pricing), read 2026-11-25: cache hit 0.0028,
    # cache miss 0.14, output 0.28 USD. The same page: V4-Pro's listed rate 0.0145/1.74/3.48.
    "deepseek-v4-flash": Price(0.14, 0.0028, 0.28, "USD"),
    "deepseek-v4-pro": Price(1.74, 0.0145, 3.48, "USD"),
    # https://genesis.pixelzx.com/docs/providers/moonshot/index.html (quoting Moonshot's
    # pay-as-you-go rates, https://platform.moonshot.ai/docs/pricing), read 2026-11-25.
    "kimi-k2.6": Price(0.95, 0.16, 4.00, "USD"),
    "kimi-k2.5": Price(0.60, 0.10, 3.00, "USD"),
    # https://help.aliyun.com/en/document_detail/3023262.html, read 2026-11-25: CNY per 1k
    # tokens for the 0-128k tier, 0.0008 input, 0.0002 cache hit, 0.002 output (0.008 for
    # output in thinking mode, which this one figure does not tell apart; longer prompts are
    # dearer tiers). The preset's endpoint is the China region, billed in CNY.
    "qwen-plus": Price(0.8, 0.2, 2.0, "CNY"),
    # https://developers.openai.com/api/docs/models/gpt-5.4, read 2026-11-25 (prompts over
    # 272K tokens cost 2x input and 1.5x output, not modelled here).
    "gpt-5.4": Price(2.50, 0.25, 15.00, "USD"),
}
# SiliconFlow's deepseek-ai/DeepSeek-V3.2: no pricing page could be read; price unknown.


def price_for(model: str, overrides: dict[str, PriceSetting]) -> Price | None:
    """The model's price: the setting's, else the table's, else None (unknown)."""
    setting = overrides.get(model)
    if setting is not None:
        cached = setting.input if setting.cached_input is None else setting.cached_input
        return Price(setting.input, cached, setting.output, setting.currency)
    return KNOWN_PRICES.get(model)
