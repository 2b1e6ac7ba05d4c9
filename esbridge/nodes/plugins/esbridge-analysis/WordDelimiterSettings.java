package org.esbridge.analysis;

import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.BooleanSetting;
import org.elasticsearch.plugin.settings.ListSetting;

import java.util.List;

/** Settings shared by word_delimiter and word_delimiter_graph, defaults as in analysis-common. */
@AnalysisSettings
public interface WordDelimiterSettings {
    @BooleanSetting(path = "generate_word_parts", defaultValue = true) boolean generateWordParts();
    @BooleanSetting(path = "generate_number_parts", defaultValue = true) boolean generateNumberParts();
    @BooleanSetting(path = "catenate_words", defaultValue = false) boolean catenateWords();
    @BooleanSetting(path = "catenate_numbers", defaultValue = false) boolean catenateNumbers();
    @BooleanSetting(path = "catenate_all", defaultValue = false) boolean catenateAll();
    @BooleanSetting(path = "split_on_case_change", defaultValue = true) boolean splitOnCaseChange();
    @BooleanSetting(path = "preserve_original", defaultValue = false) boolean preserveOriginal();
    @BooleanSetting(path = "split_on_numerics", defaultValue = true) boolean splitOnNumerics();
    @BooleanSetting(path = "stem_english_possessive", defaultValue = true) boolean stemEnglishPossessive();
    @BooleanSetting(path = "ignore_keywords", defaultValue = false) boolean ignoreKeywords();
    @BooleanSetting(path = "adjust_offsets", defaultValue = true) boolean adjustOffsets();
    @ListSetting(path = "protected_words") List<String> protectedWords();
    @ListSetting(path = "type_table") List<String> typeTable();
}
