"""The papers' figures each experiment is printed beside, transcribed from the text in
`../shared/papers/`, and the differences of protocol a reader must know before comparing.

A/B Agent reports its Tables 3 and 4 for GPT-4o-mini only, so Table 2 is set beside its
GPT-4o-mini column too (the other two backbones order the arms the same way, §3.2.1).
The paper gives no offline AUC in Tables 2-4 and no intervals anywhere."""

from __future__ import annotations

# A/B Agent Table 2, MovieLens rows, "A/B Agent (GPT-4o-mini)" and "Real-World" columns.
TABLE2 = {
    "random": {"ctr": 0.0872, "cvr": 0.0461, "average_rating": 4.01, "recall_at_k": 0.0066, "ndcg_at_k": 0.0222},
    "pop": {"ctr": 0.1886, "cvr": 0.1181, "average_rating": 4.20, "recall_at_k": 0.0216, "ndcg_at_k": 0.0881},
    "fm": {"ctr": 0.2642, "cvr": 0.1984, "average_rating": 4.52, "recall_at_k": 0.0353, "ndcg_at_k": 0.0987},
    "afn": {"ctr": 0.2845, "cvr": 0.1995, "average_rating": 4.52, "recall_at_k": 0.0422, "ndcg_at_k": 0.1238},
    "deepfm": {"ctr": 0.2891, "cvr": 0.2094, "average_rating": 4.52, "recall_at_k": 0.0429, "ndcg_at_k": 0.1130},
}
# Table 3: DeepFM on 50 / 75 / 100 % of the training data (GPT-4o-mini).
TABLE3 = {
    "deepfm_data50": {"ctr": 0.2205, "cvr": 0.1803, "average_rating": 4.51, "recall_at_k": 0.0275, "ndcg_at_k": 0.0738},
    "deepfm_data75": {"ctr": 0.2745, "cvr": 0.1999, "average_rating": 4.51, "recall_at_k": 0.0330, "ndcg_at_k": 0.0918},
    "deepfm": {"ctr": 0.2891, "cvr": 0.2094, "average_rating": 4.52, "recall_at_k": 0.0429, "ndcg_at_k": 0.1130},
}
# Table 4: DeepFM feature ablation (GPT-4o-mini).
TABLE4 = {
    "deepfm_user_id_only": {
        "ctr": 0.2754,
        "cvr": 0.1982,
        "average_rating": 4.47,
        "recall_at_k": 0.0359,
        "ndcg_at_k": 0.0981,
    },
    "deepfm_movie_id_only": {
        "ctr": 0.2850,
        "cvr": 0.2097,
        "average_rating": 4.51,
        "recall_at_k": 0.0372,
        "ndcg_at_k": 0.0966,
    },
    "deepfm": {"ctr": 0.2891, "cvr": 0.2094, "average_rating": 4.52, "recall_at_k": 0.0429, "ndcg_at_k": 0.1130},
}
# Table 5: test AUC of each downstream model (columns) per training set (rows); the data
# was simulated under DeepFM (§3.4).
TABLE5_MODELS = ("nfm", "xdeepfm", "wdl", "dcn", "deepfm", "afn", "autoint", "pnn")
TABLE5 = {
    "original": (0.7438, 0.7478, 0.7469, 0.7517, 0.7520, 0.7512, 0.7510, 0.7474),
    "+click (w/o vision)": (0.7458, 0.7482, 0.7485, 0.7533, 0.7501, 0.7502, 0.7527, 0.7503),
    "+view (w/o vision)": (0.7455, 0.7486, 0.7482, 0.7534, 0.7528, 0.7543, 0.7532, 0.7518),
    "+click (w/ vision)": (0.7464, 0.7502, 0.7501, 0.7539, 0.7541, 0.7530, 0.7531, 0.7499),
    "+view (w/ vision)": (0.7475, 0.7517, 0.7521, 0.7537, 0.7542, 0.7556, 0.7543, 0.7520),
}
# SimUSER Table 4 (§4.4), MovieLens column: an LLM judge's 1-5 Likert score of how human the
# agents' interactions read, and the ± the table prints beside each.
TABLE4_BELIEVABILITY = {
    "RecAgent": (3.01, 0.14),
    "Agent4Rec": (3.04, 0.12),
    "SimUSER (w/o persona)": (3.72, 0.18),
    "SimUSER (persona)": (4.41, 0.16),
}
# SimUSER Appendix C.7: Figure 10's bars are not in the text, only their order.
THUMBNAILS = (
    "SimUSER (App. C.7, Figure 10; 100 movies, 100 agents, GPT-4 family): original posters get a higher click rate "
    "than random trailer screenshots and than blue-filtered posters. The text gives the order only, no numbers."
)

COMMON_DIFFERENCES = (
    "Agents: the embedded brain (fitted logistic models over retrieval, genre, crowd and demographic features), "
    "not GPT-4o-mini, unless the run says `llm`.",
    "Poster features: palette / layout statistics computed with pillow by default, not CLIP.",
    "Data: whatever the run's source is (ML-1M users 1-1999 for the closing notes; the paper uses all 6,040 users).",
    "Intervals: 95 % bootstrap over agents (simulated) and over test users (Recall@20, NDCG@20); the paper gives point values.",
)
DIFFERENCES = {
    "table2": COMMON_DIFFERENCES
    + (
        "AUC is the test AUC of the arm's scores (Random's and Pop's too); the paper's Table 2 has no AUC column.",
        "AFN only when configured ($SIMAB_ARMS): its CPU training is ~14x DeepFM's.",
    ),
    "table3": COMMON_DIFFERENCES
    + (
        "Data share: the first 50 / 75 % of the chronological train split's rows is an assumption; the paper does not say how it subsampled.",
    ),
    "table4": COMMON_DIFFERENCES
    + (
        "'Movie ID only' drops every item-side feature (genres and, when present, the TMDB fields); 'User ID only' drops gender, age, occupation, zip.",
    ),
    "table5": COMMON_DIFFERENCES
    + (
        "The paper trains each cell once; here every cell is the mean over training seeds, with a t-interval of the AUC gain over seeds.",
        "'w/o vision': the embedded brain with its poster features zeroed (the LLM brain: palette captions instead of images).",
        "Simulated rows already in train are dropped; clicks are positives (rating 4), views keep the agent's rating (label: rating >= 4).",
    ),
    "thumbnails": (
        "Agents browse a home page of 20 movies drawn from the sampled movies (ones they never rated), not a yes/no question per movie; "
        "click rate = clicks / home impressions, per agent, paired over the same agents, lists and random draws in every version.",
        "Trailer screenshot stand-in (no trailers here): a 16:9 band across the middle of the poster, scaled to the poster's size — "
        "a frame of the film's imagery without the poster's title block.",
        "Blue filter (the paper: hue 30, lightness 30, saturation 30): the poster blended 45 % with a saturated blue and lightened.",
        "A version is what the whole site shows: a sampled movie an agent rated (never on its own list) carries that version's poster in its memory too.",
    ),
    "causal": (
        "Agents: the embedded brain, not GPT-4; the arm: the filter-bubble study's (FM by default; Agent4Rec: MF), retrained after each round.",
        "Quality and popularity: the train window's mean rating and log(1 + number of ratings) (Agent4Rec's item profile), or with "
        "item_facts=catalogue the catalogue's vote_average and log(1 + vote_count); fixed through the rounds, so the loop's return "
        "step (views raising popularity) is not an edge of the per-item graph.",
        "Exposure rate: the share of the agents' sessions whose home pages showed the item; items never watched (no rating) are left out.",
        "The variables are standardised before DirectLiNGAM, so weights compare; a bootstrap over items gives each edge's share (the paper gives neither).",
        "Prior knowledge (prior_knowledge=true, the default): nothing simulated causes quality or popularity, known before the first "
        "round; without it DirectLiNGAM may orient an edge against time (Agent4Rec names none).",
    ),
    "believability": (
        "The judge is the configured `llm` endpoint (the paper: GPT-4o), the same one an LLM brain would use; with none configured "
        "nothing is measured.",
        "Each trajectory is one agent's session as this simulator records it: the pages, the movies shown, every action with "
        "its reason, the ratings and the exit interview; the paper does not publish its judge prompt.",
        "The brains compared are this simulator's (embedded, llm, ...), not RecAgent, Agent4Rec and SimUSER: Table 4's rows are set "
        "beside ours for scale only.",
        "Intervals: 95 % bootstrap over the trajectories judged; the paper's ± is not said to be a standard deviation or an interval.",
    ),
    "brains": (
        "Both brains see the same agents, the same top-20 lists and the same fatigue budgets; their random draws differ only in what each brain decides.",
        "The LLM brain answers through the configured endpoint (the tests use the fake one, whose answers are scripted, not a model's).",
    ),
}

# What the embedded brain's poster features can and cannot see (said beside the
# thumbnail table whenever the embedded brain ran it).
EMBEDDED_POSTER_FEATURES = (
    "What the embedded brain sees of a poster: with the default palette / layout features, a hue histogram, brightness and "
    "saturation levels, a few dominant colours and a 3x3 grid of brightness, saturation and edge energy — nothing else. "
    "It cannot see objects, faces, text, titles, genre cues, sharpness or artistic quality. A poster enters its decision only "
    "through poster familiarity and poster affinity: how much the shown poster's features resemble those of the posters of "
    "movies the agent rated (weighted by its ratings). So a blue filter or a crop changes the click rate only by moving the "
    "poster nearer to or farther from the agent's remembered posters; it has no notion that a distorted image is worse, and "
    "the sign of the effect says nothing about thumbnail quality. With CLIP poster features configured it would compare "
    "semantic image content instead, still by similarity to remembered posters."
)
