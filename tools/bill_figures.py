"""The figures the lifecycle's bill from the settings uses (`ops.preflight.bill`), measured on
a prepared lifecycle: calls per session and prompt tokens per call of a simulation, from the
LLM brain's own prompts written in a dry run while the embedded brain decides
(`ops.simulation.cost`), nothing sent.  Each figure is printed beside the constant the bill
uses, as a ratio (measured / constant): above 1, the bill's expected figure is too low.

The trust protocols' figures come from the same dry run the protocols make before their
first call; a lifecycle run with the LLM brain logs them ("LLM bill before taste_alignment:
… calls, … tokens"), docs/cost.md gives the command.

    SIMAB_HOME=data/bill .venv/bin/python -m tools.bill_figures --arms random,pop --agents 200
"""

from __future__ import annotations

import argparse


def main() -> None:
    from ops.preflight import bill
    from ops.simulation.assignment import sample_agents
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
    from ops.simulation.catalogue import Catalogue
    from ops.simulation.cost import CostEstimateConfig, estimate_llm_cost
    from ops.simulation.request import SimulationConfig
    from resources.storage import SimabIOManager

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="random,pop", help="arms whose top-20 lists are stored")
    parser.add_argument("--agents", type=int, default=200, help="agents dry-run per arm (a seeded sample)")
    args = parser.parse_args()

    io = SimabIOManager()
    agents, model, frame = io.stored("agents"), io.stored("embedded_brain"), io.stored("catalogue")
    catalogue = Catalogue.from_frame(frame)
    print("arm     vision  agents  calls/session  prompt tokens/call mean (longest)  answer tokens/call")
    ratios = []
    for arm in args.arms.split(","):
        top = io.stored("top20_lists", arm)
        users = sample_agents(sorted(set(top["user_id"].to_list()) & set(agents.profiles)), args.agents, 0)
        for vision in (True, False):
            config = LLMBrainConfig(
                vision=vision, cache="off", base_url="http://127.0.0.1:9/v1", api_key_required=False
            )
            brain = LLMBrain(config, catalogue=catalogue)
            try:  # every sampled agent dry-run: nothing extrapolated, nothing sent
                e = estimate_llm_cost(
                    arm,
                    top,
                    agents.sessions(users),
                    catalogue,
                    brain,
                    model.brain(),
                    SimulationConfig(),
                    users,
                    CostEstimateConfig(sample_agents=len(users)),
                )
            finally:
                brain.close()
            per_session, mean = e.calls / e.agents, e.prompt_tokens / e.calls
            longest = e.ceiling_prompt_tokens // e.ceiling_calls
            print(
                f"{arm:<8}{vision!s:<8}{e.agents:<8}{per_session:>13.1f}{mean:>24.0f} ({longest})"
                f"{e.completion_tokens / e.calls:>26.0f}"
            )
            if vision:  # the bill's figures are the vision ones (the default, and the dearer)
                ratios.append(
                    (arm, per_session / bill.SESSION_CALLS, mean / bill.PAGE_PROMPT, longest / bill.PAGE_PROMPT_LONGEST)
                )
    print()
    print(
        f"measured / the bill's constant (calls {bill.SESSION_CALLS:g}, prompt {bill.PAGE_PROMPT:,}, "
        f"longest {bill.PAGE_PROMPT_LONGEST:,})"
    )
    for arm, calls, prompt, longest in ratios:
        print(f"  {arm:<8}calls {calls:.2f}  prompt {prompt:.2f}  longest {longest:.2f}")


if __name__ == "__main__":
    main()
