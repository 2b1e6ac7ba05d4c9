package org.esbridge.features;

import org.opensearch.index.IndexModule; //@opensearch
import org.elasticsearch.index.IndexModule; //@elasticsearch
import org.apache.lucene.search.similarities.BM25Similarity; //@opensearch
import org.opensearch.common.settings.Settings; //@opensearch
import org.elasticsearch.lucene.similarity.LegacyBM25Similarity; //@elasticsearch
import org.elasticsearch.common.settings.Settings; //@elasticsearch
import org.opensearch.common.settings.Setting; //@opensearch
import org.elasticsearch.common.settings.Setting; //@elasticsearch
import org.apache.lucene.search.similarities.Similarity;
import org.opensearch.plugins.Plugin; //@opensearch
import org.elasticsearch.plugins.Plugin; //@elasticsearch
import org.opensearch.plugins.SearchPlugin; //@opensearch
import org.elasticsearch.plugins.SearchPlugin; //@elasticsearch
import org.opensearch.search.fetch.FetchSubPhase; //@opensearch
import org.elasticsearch.search.fetch.FetchSubPhase; //@elasticsearch

import java.util.List;

/**
 * Registers the {@code esbridge_features} search extension and the fetch sub-phase that answers it,
 * each request within the limits of the node's settings {@code esbridge.features.*} ({@link FeaturesLimits}).
 *
 * The extension names groups of fields with the terms to read in them; the sub-phase adds to each
 * hit, per group, the group's length, its number of distinct terms and each term's frequency, read
 * from the hit's stored term vectors next to the postings, and to the first hit each shard returns
 * the named terms' statistics as the searcher sees them: index-wide under dfs_query_then_fetch.
 * Nothing is scored here: esbridge's scorers read these numbers.
 *
 * It also adds the similarity type {@code esbridge_bm25} ({@link ExactLengthSimilarity}): the
 * engine's BM25, whose norms keep each document's exact length and distinct terms, so that an
 * index whose text fields use it needs no stored term vectors.
 */
public class FeaturesPlugin extends Plugin implements SearchPlugin {
    /** The node settings that bound one request's extension ({@link FeaturesLimits}). */
    static final Setting<Integer> MAX_TERMS = Setting.intSetting(FeaturesLimits.MAX_TERMS,
        FeaturesLimits.DEFAULTS.maxTerms(), 1, Setting.Property.NodeScope);
    static final Setting<Integer> MAX_FIELDS = Setting.intSetting(FeaturesLimits.MAX_FIELDS,
        FeaturesLimits.DEFAULTS.maxFields(), 1, Setting.Property.NodeScope);
    static final Setting<Integer> MAX_ANALYZE_CHARS = Setting.intSetting(FeaturesLimits.MAX_ANALYZE_CHARS,
        FeaturesLimits.DEFAULTS.maxAnalyzeChars(), 1, Setting.Property.NodeScope);

    private final FeaturesLimits limits;

    public FeaturesPlugin(Settings settings) {
        limits = new FeaturesLimits(MAX_TERMS.get(settings), MAX_FIELDS.get(settings), MAX_ANALYZE_CHARS.get(settings));
    }

    @Override
    public List<Setting<?>> getSettings() {
        return List.of(MAX_TERMS, MAX_FIELDS, MAX_ANALYZE_CHARS);
    }

    @Override
    public List<SearchExtSpec<?>> getSearchExts() {
        return List.of(new SearchExtSpec<>(FeaturesExt.NAME, FeaturesExt::new,
            parser -> FeaturesExt.parse(parser, limits)));
    }

    @Override
    public void onIndexModule(IndexModule module) {
        module.addSimilarity(ExactLengthSimilarity.TYPE, (settings, version, scripts) ->
            new ExactLengthSimilarity(bm25(settings)));
    }

    /** The BM25 the engine's own similarity type {@code BM25} makes of the same settings. */
    private static Similarity bm25(Settings settings) {
        for (String key : settings.keySet()) {
            if (!List.of("type", "k1", "b", "discount_overlaps").contains(key)) {
                throw new IllegalArgumentException("Unknown settings for similarity of type ["
                    + ExactLengthSimilarity.TYPE + "]: [" + key + "]");
            }
        }
        float k1 = settings.getAsFloat("k1", 1.2f);
        float b = settings.getAsFloat("b", 0.75f);
        boolean discountOverlaps = settings.getAsBoolean("discount_overlaps", true);
        return new BM25Similarity(k1, b, discountOverlaps); //@opensearch
        return new LegacyBM25Similarity(k1, b, discountOverlaps); //@elasticsearch
    }

    @Override
    public List<FetchSubPhase> getFetchSubPhases(FetchPhaseConstructionContext context) {
        return List.of(new FeaturesFetchSubPhase(limits));
    }
}
